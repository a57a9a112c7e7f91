// The split-KV merge of the decode kernel, run inside it: every split CTA of a (sequence, KV head)
// writes its partial (normalised fp32 O and natural-log LSE, decode_store), then counts itself on
// an arrival counter; the CTA that arrives last reads all the partials back and writes O and LSE.
// This saves the second kernel a separate combine needs: its launch, the wait for the whole
// attention grid to drain, and its own ramp, all on the critical path of a short decode call.
//
// The math is merge_states' (combine_kernel.cuh): LSE = log(sum_n exp(LSE_n)) with the sink as
// one more state with O = 0 that counts only when some split saw a key, O = sum_n w_n O_n. Each
// thread folds a fixed set of splits in index order and the threads' states meet in a fixed
// order, whichever CTA happens to be last, so results are bit-identical across runs.
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

// The most splits a decode call takes: bounds the workspace and the merging CTA's loads per item.
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
//
// The last CTA's merge is on the critical path of every split call, so it is one pass with its
// loads in flight together: each (row, 4 columns) item gets T threads (a power of two, as many
// as the CTA has for its items: 2 at batch 1 with 4 rows), each of which loads the LSEs and O
// quads of every T-th split, up to kMergeLoads of them at once, folds them into an online state
// (max, denominator, weighted O), and the T states meet through shuffles in a fixed order. No
// shared memory and no barrier after the arrival count; the result does not depend on which CTA
// came last.
inline constexpr int kMergeLoads = 16;

template <class Tile, typename T>
__device__ __forceinline__ void decode_merge_if_last(const FwdParams& p, int rows, int b, int hk,
                                                     int q_start) {
  constexpr int kDv = Tile::kDv, kThreads = Tile::kThreads;
  constexpr int kC = kDv / 4;
  __shared__ int s_last;
  const int tid = threadIdx.x;
  const int S = p.num_splits, G = p.group.d;

  // One thread counts the arrival with an acquire-release atomic at GPU scope. Release: the
  // barrier orders every thread's partial stores before it, and a release is cumulative, so they
  // are visible device-wide before the count. Acquire: the last CTA's reads, ordered after it by
  // the second barrier, see every other split's partial. (A fence in every thread instead, as
  // before, cost each thread a full membar.gl on the call's critical path.)
  __syncthreads();
  if (tid == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");  // the counters were zeroed before
#endif
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(old)
                 : "l"(p.split_counters + int64_t{b} * p.hkv + hk)
                 : "memory");
    s_last = old == static_cast<unsigned>(S - 1);
  }
  __syncthreads();
  if (!s_last) return;

  const int items = rows * kC;
  int tpi = 1;  // threads per item
  while (tpi < 32 && 2 * tpi * items <= kThreads) tpi *= 2;
  const int sub = tid & (tpi - 1);
  const int per_pass = kThreads / tpi;
  // Partials of other CTAs are read with ld.global.cg (L2), never from this SM's L1.
  const int64_t lse_split_stride = p.part_rows * p.hq;
  const int64_t o_split_stride = lse_split_stride * kDv;
  // Every lane runs the same passes (the shuffles below need the whole warp).
  for (int base = 0; base < items; base += per_pass) {
    const int it = base + tid / tpi;
    const bool active = it < items;
    const int rr = active ? it / kC : 0, c = (it % kC) * 4;
    int tok, hg;
    p.group.divmod(rr, tok, hg);
    const int head = hk * G + hg;
    const int64_t flat =
        p.cu_seqlens_q != nullptr ? int64_t{q_start} + tok : int64_t{b} * p.q_rows + tok;
    const float* lse_src = p.part_lse + flat * p.hq + head;
    const float* o_src = p.part_o + (flat * p.hq + head) * kDv + c;

    // This thread's splits sub, sub + tpi, ...: m = their largest LSE, den = sum exp(LSE_n - m),
    // acc = sum exp(LSE_n - m) O_n. A split that saw no key has LSE -inf and O = 0; a zero
    // weight is skipped so that it cannot turn an infinite value into NaN.
    float m = -INFINITY, den = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int n0 = sub; n0 < S; n0 += tpi * kMergeLoads) {
      float l[kMergeLoads];
      float4 x[kMergeLoads];
#pragma unroll
      for (int k = 0; k < kMergeLoads; ++k) {
        const int n = n0 + k * tpi;
        l[k] = -INFINITY;
        x[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (active && n < S) {
          l[k] = __ldcg(lse_src + n * lse_split_stride);
          x[k] = __ldcg(reinterpret_cast<const float4*>(o_src + n * o_split_stride));
        }
      }
      float mc = m;
#pragma unroll
      for (int k = 0; k < kMergeLoads; ++k) mc = fmaxf(mc, l[k]);
      if (mc == -INFINITY) continue;
      if (m != -INFINITY) {  // else den and acc are still 0
        const float r = exp2f((m - mc) * kLog2e);
        den *= r;
        acc.x *= r;
        acc.y *= r;
        acc.z *= r;
        acc.w *= r;
      }
#pragma unroll
      for (int k = 0; k < kMergeLoads; ++k) {
        const float w = exp2f((l[k] - mc) * kLog2e);
        if (w != 0.f) {
          den += w;
          acc.x += w * x[k].x;
          acc.y += w * x[k].y;
          acc.z += w * x[k].z;
          acc.w += w * x[k].w;
        }
      }
      m = mc;
    }
    // The tpi states of an item, lanes xor 1, 2, 4, ...: lane sub == 0's result is the same on
    // every run.
    for (int off = 1; off < tpi; off *= 2) {
      const float mo = __shfl_xor_sync(0xffffffffu, m, off);
      const float dno = __shfl_xor_sync(0xffffffffu, den, off);
      float4 ao;
      ao.x = __shfl_xor_sync(0xffffffffu, acc.x, off);
      ao.y = __shfl_xor_sync(0xffffffffu, acc.y, off);
      ao.z = __shfl_xor_sync(0xffffffffu, acc.z, off);
      ao.w = __shfl_xor_sync(0xffffffffu, acc.w, off);
      const float mn = fmaxf(m, mo);
      if (mn == -INFINITY) continue;  // neither saw a key
      const float wa = m == -INFINITY ? 0.f : exp2f((m - mn) * kLog2e);
      const float wb = mo == -INFINITY ? 0.f : exp2f((mo - mn) * kLog2e);
      den = den * wa + dno * wb;
      acc.x = (wa != 0.f ? acc.x * wa : 0.f) + (wb != 0.f ? ao.x * wb : 0.f);
      acc.y = (wa != 0.f ? acc.y * wa : 0.f) + (wb != 0.f ? ao.y * wb : 0.f);
      acc.z = (wa != 0.f ? acc.z * wa : 0.f) + (wb != 0.f ? ao.z * wb : 0.f);
      acc.w = (wa != 0.f ? acc.w * wa : 0.f) + (wb != 0.f ? ao.w * wb : 0.f);
      m = mn;
    }
    if (!active || sub != 0) continue;

    // The sink is one more state with O = 0 that counts only when some split saw a key.
    float o_scale = 0.f, lse = -INFINITY;
    if (m != -INFINITY) {
      float m_fin = m, keep = 1.f;
      if (p.sinks != nullptr) {
        const float sink = __ldg(p.sinks + head * p.sinks_stride);
        m_fin = fmaxf(m, sink);
        keep = exp2f((m - m_fin) * kLog2e);
        den = den * keep + exp2f((sink - m_fin) * kLog2e);
      }
      o_scale = keep / den;
      lse = m_fin + logf(den);
    }
    T* dst = static_cast<T*>(p.o) + b * p.o_batch_stride + int64_t{q_start + tok} * p.o_row_stride +
             int64_t{head} * p.o_head_stride + c;
    dst[0] = from_float<T>(acc.x * o_scale);
    dst[1] = from_float<T>(acc.y * o_scale);
    dst[2] = from_float<T>(acc.z * o_scale);
    dst[3] = from_float<T>(acc.w * o_scale);
    if (p.lse != nullptr && c == 0)
      p.lse[b * p.lse_batch_stride + int64_t{q_start + tok} * p.lse_row_stride +
            int64_t{head} * p.lse_head_stride] = lse;
  }
}

}  // namespace attnkit::gpu
