// The split-KV merge of the decode kernel, run inside it: every split CTA of a (sequence, KV head)
// writes its partial (normalised fp32 O and natural-log LSE, decode_store), then counts itself on
// an arrival counter; the CTA that arrives last reads all the partials back and writes O and LSE.
// This saves the second kernel a separate combine needs: its launch, the wait for the whole
// attention grid to drain, and its own ramp, all on the critical path of a short decode call.
//
// The math is merge_states' (combine_kernel.cuh): LSE = log(sum_n exp(LSE_n)) with the sink as
// one more state with O = 0 that counts only when some split saw a key, O = sum_n w_n O_n. The
// sum runs over the splits in index order whichever CTA happens to be last, so results are
// bit-identical across runs.
//
// The counters live in the plan's workspace, which is scratch (ExecOptions) and may hold anything
// between calls, so the launcher zeroes them in a tiny kernel right before the attention kernel
// (decode_launch.cuh). On sm_90 the attention kernel is that kernel's programmatic dependent and
// starts at once; griddepcontrol.wait, before the counter is touched, orders it after the zeroing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention/policy/score_mod.cuh"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// The most splits the merge takes (its shared scratch holds one weight per split and row).
inline constexpr int kMaxDecodeSplits = 128;

// Zeroes the arrival counters of one decode call, then lets the attention kernel start.
// (A template, so that every TU including this header may instantiate it.)
template <int kBlock>
__global__ void __launch_bounds__(kBlock) decode_zero_counters(unsigned* counters, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  for (int i = blockIdx.x * kBlock + threadIdx.x; i < n; i += gridDim.x * kBlock)
    counters[i] = 0u;
}

// Called by every thread of a split CTA after decode_store wrote its partial rows [0, rows).
// `scratch`: shared memory for (rows x num_splits + rows) floats, free once all threads are past
// decode_store (the first barrier below).
template <class Tile, typename T>
__device__ __forceinline__ void decode_merge_if_last(const FwdParams& p, float* scratch, int rows,
                                                     int b, int hk, int q_start) {
  constexpr int kDv = Tile::kDv, kThreads = Tile::kThreads, kWarps = kThreads / 32;
  constexpr int kC = kDv / 4;
  static_assert(Tile::kRows * (kMaxDecodeSplits + 1) * 4 <= Tile::kStages * Tile::kStageBytes,
                "merge scratch must fit in the stages");
  __shared__ int s_last;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int S = p.num_splits, G = p.group.d;

  // Release: this CTA's partial is visible device-wide before its arrival is counted.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");  // the counters were zeroed before
#endif
    const unsigned old = atomicAdd(p.split_counters + int64_t{b} * p.hkv + hk, 1u);
    s_last = old == static_cast<unsigned>(S - 1);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // acquire: the other splits' partials are read after their arrivals

  // Partials of other CTAs are read with ld.global.cg (L2), never from this SM's L1.
  const int64_t lse_split_stride = p.part_rows * p.hq;
  const int64_t o_split_stride = lse_split_stride * kDv;
  auto flat_row = [&](int tok) {
    return p.cu_seqlens_q != nullptr ? int64_t{q_start} + tok : int64_t{b} * p.q_rows + tok;
  };

  // ---- the splits' LSEs, then per row (one warp each) the weights w_n = exp(LSE_n - LSE)
  float* s_w = scratch;              // [rows][S]
  float* s_lse = scratch + rows * S;  // [rows]
  for (int idx = tid; idx < rows * S; idx += kThreads) {
    const int rr = idx / S, n = idx - rr * S;
    int tok, hg;
    p.group.divmod(rr, tok, hg);
    s_w[idx] = __ldcg(p.part_lse + n * lse_split_stride + flat_row(tok) * p.hq + hk * G + hg);
  }
  __syncthreads();
  for (int rr = warp; rr < rows; rr += kWarps) {
    float* w = s_w + rr * S;
    float m = -INFINITY;
    for (int n = lane; n < S; n += 32) m = fmaxf(m, w[n]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    // No split saw a key: O = 0, LSE = -inf, whatever the sink (a sink alone is no key).
    float sink = -INFINITY;
    if (m != -INFINITY && p.sinks != nullptr)
      sink = __ldg(p.sinks + (hk * G + rr % G) * p.sinks_stride);
    m = fmaxf(m, sink);
    const float m_use = m == -INFINITY ? 0.f : m;
    float denom = 0.f;
    for (int n = lane; n < S; n += 32) {
      const float e = exp2f((w[n] - m_use) * kLog2e);
      w[n] = e;
      denom += e;
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) denom += __shfl_xor_sync(0xffffffffu, denom, off);
    denom += exp2f((sink - m_use) * kLog2e);
    const float inv = denom > 0.f ? 1.f / denom : 0.f;
    for (int n = lane; n < S; n += 32) w[n] *= inv;
    if (lane == 0) s_lse[rr] = denom > 0.f ? m_use + logf(denom) : -INFINITY;
  }
  __syncthreads();

  // ---- O: 4 columns per thread, the splits summed in index order
  for (int idx = tid; idx < rows * kC; idx += kThreads) {
    const int rr = idx / kC, c = (idx % kC) * 4;
    int tok, hg;
    p.group.divmod(rr, tok, hg);
    const int head = hk * G + hg;
    const float* src = p.part_o + (flat_row(tok) * p.hq + head) * kDv + c;
    const float* w = s_w + rr * S;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int n = 0; n < S; ++n) {
      // Every split wrote its partial (0 where it saw no key), so the load is always valid; a
      // zero weight is skipped so that it cannot turn an infinite value into NaN.
      const float4 x = __ldcg(reinterpret_cast<const float4*>(src + n * o_split_stride));
      const float wt = w[n];
      if (wt != 0.f) {
        acc.x += wt * x.x;
        acc.y += wt * x.y;
        acc.z += wt * x.z;
        acc.w += wt * x.w;
      }
    }
    T* dst = static_cast<T*>(p.o) + b * p.o_batch_stride + int64_t{q_start + tok} * p.o_row_stride +
             int64_t{head} * p.o_head_stride + c;
    dst[0] = from_float<T>(acc.x);
    dst[1] = from_float<T>(acc.y);
    dst[2] = from_float<T>(acc.z);
    dst[3] = from_float<T>(acc.w);
    if (p.lse != nullptr && c == 0)
      p.lse[b * p.lse_batch_stride + int64_t{q_start + tok} * p.lse_row_stride +
            int64_t{head} * p.lse_head_stride] = s_lse[rr];
  }
}

}  // namespace attnkit::gpu
