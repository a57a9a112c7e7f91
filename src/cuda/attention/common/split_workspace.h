// Split-KV plumbing on the host, shared by both attention dispatchers (portable_dispatch.cu, and
// sm90_dispatch.cu, whose splits write the portable layout for the portable combine kernel): the
// workspace of partials, the caller's-or-owned buffer that holds it, and the FwdParams fields that
// name the output (O, LSE, ragged Q, sinks), which the combine kernel reads besides the partials.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "api/attention_problem.h"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/common/cuda_check.h"

namespace attnkit::detail {

// Flat query rows of one split's partials: batch x Sq, or total_q when Q is ragged (the combine
// kernel's indexing).
inline int64_t split_part_rows(const AttnProblem& prob) {
  return prob.q_ragged ? prob.q_rows : int64_t{prob.batch} * prob.q_rows;
}

// The workspace of `splits` partials: fp32 O, fp32 LSE, then `counter_bytes` (the decode kernel's
// arrival counters), each part 256-byte aligned. Empty for one split.
struct SplitWorkspace {
  size_t lse_offset = 0, counters_offset = 0, bytes = 0;
};
inline SplitWorkspace split_workspace(const AttnProblem& prob, int splits, size_t counter_bytes) {
  auto align = [](size_t x) { return (x + 255) / 256 * 256; };
  SplitWorkspace w;
  if (splits <= 1) return w;
  const size_t rows = static_cast<size_t>(splits) * split_part_rows(prob) * prob.hq;
  w.lse_offset = align(rows * prob.dv * sizeof(float));
  w.counters_offset = w.lse_offset + align(rows * sizeof(float));
  w.bytes = w.counters_offset + align(counter_bytes);
  return w;
}

// Points *ws at the caller's workspace when it is large enough and 16-byte aligned (the partials
// are written as float2), else at a stream-ordered allocation, also returned in *owned for
// release_split_workspace.
inline Status acquire_split_workspace(const ExecOptions& opts, size_t bytes, cudaStream_t stream,
                                      void** ws, void** owned) {
  *owned = nullptr;
  *ws = opts.workspace;
  if (*ws != nullptr && opts.workspace_bytes >= bytes && reinterpret_cast<uintptr_t>(*ws) % 16 == 0)
    return Status::Ok();
  ATTNKIT_CUDA_TRY(cudaMallocAsync(owned, bytes, stream));
  *ws = *owned;
  return Status::Ok();
}

// Frees `owned` stream-ordered after the kernels that use it, also when a launch failed; the
// launches' status `st` comes first.
inline Status release_split_workspace(void* owned, cudaStream_t stream, Status st) {
  if (owned == nullptr) return st;
  const cudaError_t err = cudaFreeAsync(owned, stream);
  if (st.ok() && err != cudaSuccess) return cuda_status(err, "cudaFreeAsync", __FILE__, __LINE__);
  return st;
}

// The output side of FwdParams: O, LSE (if asked for), ragged Q, sinks and the problem's extents,
// which are what the split-KV combine kernel reads besides the partials.
inline void set_output_params(gpu::FwdParams& p, const AttentionArgs& a, const AttnProblem& prob) {
  const bool qr = prob.q_ragged;
  p.o = a.o.data;
  p.o_batch_stride = qr ? 0 : a.o.stride[0];
  p.o_row_stride = qr ? a.o.stride[0] : a.o.stride[1];
  p.o_head_stride = a.o.stride_of(-2);
  if (prob.has_lse) {
    p.lse = static_cast<float*>(a.lse.data);
    p.lse_batch_stride = qr ? 0 : a.lse.stride[0];
    p.lse_row_stride = qr ? a.lse.stride[0] : a.lse.stride[1];
    p.lse_head_stride = a.lse.stride_of(-1);
  }
  if (qr) {
    p.cu_seqlens_q = static_cast<const int32_t*>(a.cu_seqlens_q.data);
    p.cu_q_stride = a.cu_seqlens_q.stride[0];
  }
  if (prob.has_sinks) {
    p.sinks = static_cast<const float*>(a.sinks.data);
    p.sinks_stride = a.sinks.stride[0];
  }
  p.batch = prob.batch;
  p.hq = prob.hq;
  p.hkv = prob.hkv;
  p.q_rows = static_cast<int>(prob.q_rows);
  p.max_seqlen_q = prob.max_seqlen_q;
}

}  // namespace attnkit::detail
