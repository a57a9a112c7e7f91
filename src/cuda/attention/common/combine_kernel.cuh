// Merging partial attention states: LSE = log(sum_n exp(LSE_n)), O = sum_n exp(LSE_n - LSE) O_n,
// a state with LSE = -inf contributing nothing, all-empty giving O = 0 and LSE = -inf.
// One warp per (row, head); the lanes stride over the head dim. Used twice: the prefill kernel's
// split-KV combine (partials from its workspace, plus the sink as one more state with O = 0; the
// sm90 prefill kernel's splits write the same layout and use it too) and
// the public merge_states op on any strides and float dtypes. (The decode kernel merges its
// splits itself: decode_merge.cuh.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attnkit/status.h"
#include "cuda/attention/policy/score_mod.cuh"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// Strided views of one merge: part n of row (t, h) at o_parts + n*on + t*ot + h*oh (+ d).
template <typename TIn, typename TOut>
struct MergeView {
  const TIn* o_parts;
  int64_t on, ot, oh;
  const float* lse_parts;
  int64_t ln, lt, lh;
  TOut* o;
  int64_t o_t, o_h;
  float* lse;  // optional
  int64_t lse_t, lse_h;
  int n, d;
};

// Merges row (t, h): `extra` is one more state with O = 0 (a sink; -inf for none) that counts
// only when some other state is non-empty.
template <typename TIn, typename TOut>
__device__ __forceinline__ void merge_row(const MergeView<TIn, TOut>& v, int64_t t, int64_t h,
                                          int64_t t_out, float extra) {
  const int lane = threadIdx.x % 32;
  float m = -INFINITY;
  for (int n = lane; n < v.n; n += 32) m = fmaxf(m, v.lse_parts[n * v.ln + t * v.lt + h * v.lh]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  // All states empty: O = 0, LSE = -inf, whatever `extra` says (a sink alone is no key).
  if (m == -INFINITY) extra = -INFINITY;
  m = fmaxf(m, extra);
  const float m_use = m == -INFINITY ? 0.f : m;
  float denom = 0.f;
  for (int n = lane; n < v.n; n += 32)
    denom += exp2f((v.lse_parts[n * v.ln + t * v.lt + h * v.lh] - m_use) * kLog2e);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) denom += __shfl_xor_sync(0xffffffffu, denom, off);
  denom += exp2f((extra - m_use) * kLog2e);
  const float inv = denom > 0.f ? 1.f / denom : 0.f;
  TOut* out = v.o + t_out * v.o_t + h * v.o_h;
  for (int d0 = lane * 2; d0 < v.d; d0 += 64) {
    float a0 = 0.f, a1 = 0.f;
    for (int n = 0; n < v.n; ++n) {
      const float lse_n = v.lse_parts[n * v.ln + t * v.lt + h * v.lh];
      if (lse_n == -INFINITY) continue;  // empty state: its O may be anything, even unwritten
      const float w = exp2f((lse_n - m_use) * kLog2e) * inv;
      const TIn* src = v.o_parts + n * v.on + t * v.ot + h * v.oh + d0;
      a0 += w * to_float(src[0]);
      if (d0 + 1 < v.d) a1 += w * to_float(src[1]);
    }
    out[d0] = from_float<TOut>(a0);
    if (d0 + 1 < v.d) out[d0 + 1] = from_float<TOut>(a1);
  }
  if (v.lse != nullptr && lane == 0)
    v.lse[t_out * v.lse_t + h * v.lse_h] = denom > 0.f ? m_use + logf(denom) : -INFINITY;
}

// The public op: rows t in [0, T), heads h in [0, H); one warp each.
template <typename TIn, typename TOut>
__global__ void merge_states_kernel(MergeView<TIn, TOut> v, int64_t rows, int heads) {
  const int64_t w = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (w >= rows * heads) return;
  merge_row(v, w / heads, w % heads, w / heads, -INFINITY);
}

// Split-KV combine: warps enumerate (token, head) of sequence blockIdx.y (q_sequence, as the
// attention kernel); the partial's flat row is ragged ? q_start + token
// : b * Sq + token, O / LSE follow Q's (batch, row, head) strides.
template <typename T>
__global__ void split_combine_kernel(const __grid_constant__ FwdParams p, int dv) {
  const int b = blockIdx.y;
  const QSeq qs = q_sequence(p, b);
  const int q_start = qs.start, sq = qs.length;
  const int64_t w = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const int tok = static_cast<int>(w / p.hq), h = static_cast<int>(w % p.hq);
  if (tok >= sq) return;
  const int64_t flat = p.cu_seqlens_q != nullptr ? int64_t{q_start} + tok : int64_t{b} * p.q_rows + tok;
  MergeView<float, T> v;
  v.o_parts = p.part_o;
  v.on = p.part_rows * p.hq * dv;
  v.ot = int64_t{p.hq} * dv;
  v.oh = dv;
  v.lse_parts = p.part_lse;
  v.ln = p.part_rows * p.hq;
  v.lt = p.hq;
  v.lh = 1;
  // Shift the output base to this sequence so that row index `tok` addresses it.
  v.o = static_cast<T*>(p.o) + b * p.o_batch_stride + int64_t{q_start} * p.o_row_stride;
  v.o_t = p.o_row_stride;
  v.o_h = p.o_head_stride;
  v.lse = p.lse != nullptr ? p.lse + b * p.lse_batch_stride + int64_t{q_start} * p.lse_row_stride
                           : nullptr;
  v.lse_t = p.lse_row_stride;
  v.lse_h = p.lse_head_stride;
  v.n = p.num_splits;
  v.d = dv;
  const float sink = p.sinks != nullptr ? __ldg(p.sinks + h * p.sinks_stride) : -INFINITY;
  merge_row(v, flat, h, tok, sink);
}

// Launches split_combine_kernel over p's sequences (four warps per block): reads p.part_o /
// p.part_lse (p.num_splits of them) and writes p.o, and p.lse if set. The fields it reads:
// batch, hq, q_rows, max_seqlen_q, cu_seqlens_q, the O / LSE strides, sinks, and the partials.
inline Status launch_split_combine(const FwdParams& p, bool bf16, int dv, cudaStream_t stream) {
  const int64_t warps = int64_t{p.max_seqlen_q} * p.hq;
  if (warps == 0 || p.batch == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>((warps + 3) / 4), static_cast<unsigned>(p.batch));
  if (bf16)
    split_combine_kernel<__nv_bfloat16><<<grid, 128, 0, stream>>>(p, dv);
  else
    split_combine_kernel<__half><<<grid, 128, 0, stream>>>(p, dv);
  ATTNKIT_CUDA_CHECK_LAUNCH("split_combine_kernel");
  return Status::Ok();
}

}  // namespace attnkit::gpu
