// FP8 (e4m3) K / V in the portable decode kernel: the stages hold the cache's bytes (half the
// shared memory and half the DRAM reads of a 16-bit cache) and the MMA operands are widened to
// fp16 in registers, after ldmatrix: one instruction per two values (to bf16 it takes four, which
// left the kernel issue-bound). Both MMAs run in fp16 whatever the query's type: bf16 queries are
// rewritten as fp16 in shared memory first (fp8_q_bf16_to_half), P is rounded to fp16.
//
// K: ldmatrix (b16) on e4m3 rows gives a thread 4 consecutive dims (4t .. 4t+3, t = lane % 4) of
// key lane / 4, where the m16n8k16 B fragment wants dims {2t, 2t+1} and {2t+8, 2t+9}. A dot
// product does not care in which order its dims come, so Q is stored in shared memory with the
// same order: within each 16-dim slab, pair slot u holds dims (4u, 4u+1) for u < 4 and
// (4(u-4)+2, 4(u-4)+3) for u >= 4 (q_pair_slot). Every e4m3 value is exact in fp16 and bf16, so
// the scores are Q K8^T exactly as with a widened K; the key's scale multiplies the fp32 score.
//
// V: ldmatrix.trans (b16) on e4m3 rows gives a thread keys (2t, 2t+1) x dims (2g, 2g+1),
// g = lane / 4: one byte permute turns that into the B fragments of two MMAs, one over the even
// dims 2g and one over the odd dims 2g + 1 of the 16-dim chunk (fp8_v_pairs), so the
// accumulator's n-block 2c holds the even dims of chunk c and 2c + 1 its odd dims. A per-token V
// scale multiplies P (fp32, before rounding): O = sum_j (p_j v_scale_j) V8_j.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/attention/portable/decode_fp8_layout.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// Two e4m3 values (low byte first) widened to two fp16 values, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_half2(uint32_t x2) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x2 & 0xffffu), __NV_E4M3);
  return uint32_t{h.x} | (uint32_t{h.y} << 16);
}

// The B fragments of one k16 slab of K for two 8-key n-blocks: r holds K8[key][4t .. 4t+3] of
// the slab (ldmatrix of the e4m3 rows); b0 / b1 as MmaOp<__half> wants them.
__device__ __forceinline__ void fp8_k_fragment(uint32_t r, uint32_t& b0, uint32_t& b1) {
  b0 = e4m3x2_to_half2(r);
  b1 = e4m3x2_to_half2(r >> 16);
}

// V's B fragments for one 16-dim chunk from ldmatrix.trans of keys 0-7 (lo) and 8-15 (hi):
// even[0..1] for dims 2g, odd[0..1] for dims 2g + 1.
__device__ __forceinline__ void fp8_v_pairs(uint32_t lo, uint32_t hi, uint32_t (&even)[2],
                                            uint32_t (&odd)[2]) {
  // bytes (key 2t dim 2g, key 2t dim 2g+1, key 2t+1 dim 2g, key 2t+1 dim 2g+1) ->
  // (key 2t dim 2g, key 2t+1 dim 2g | key 2t dim 2g+1, key 2t+1 dim 2g+1)
  const uint32_t l = __byte_perm(lo, 0, kFp8VPairSelector), h = __byte_perm(hi, 0, kFp8VPairSelector);
  even[0] = e4m3x2_to_half2(l);
  even[1] = e4m3x2_to_half2(h);
  odd[0] = e4m3x2_to_half2(l >> 16);
  odd[1] = e4m3x2_to_half2(h >> 16);
}

// bf16 queries over an FP8 cache: rewrites Q (kRows x kDqk at row stride kQS, already in shared
// memory) in place as fp16 values q 2^-e, e = fp8_q_exponent(max |q| over the CTA's rows), and
// returns 2^e, the factor that restores the scores. Every thread of the CTA calls it; amax_bits
// is a shared word. Starts and ends with a barrier.
template <int kRows, int kDqk, int kQS, int kThreads>
__device__ float fp8_q_bf16_to_half(__nv_bfloat16* sQ, unsigned* amax_bits) {
  constexpr int kPairs = kRows * kDqk / 2;
  const int tid = threadIdx.x;
  if (tid == 0) *amax_bits = 0u;
  __syncthreads();
  float mx = 0.f;
  for (int i = tid; i < kPairs; i += kThreads) {
    const auto* q = sQ + (i / (kDqk / 2)) * kQS + 2 * (i % (kDqk / 2));
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(q));
    mx = fmaxf(mx, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  // Non-negative floats order as their bit patterns.
  const unsigned warp_max = __reduce_max_sync(0xffffffffu, __float_as_uint(mx));
  if (tid % 32 == 0) atomicMax(amax_bits, warp_max);
  __syncthreads();
  const int e = fp8_q_exponent(__uint_as_float(*amax_bits));
  const float down = ldexpf(1.f, -e);
  for (int i = tid; i < kPairs; i += kThreads) {
    auto* q = reinterpret_cast<uint32_t*>(sQ + (i / (kDqk / 2)) * kQS + 2 * (i % (kDqk / 2)));
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(q));
    *q = pack2<__half>(f.x * down, f.y * down);
  }
  __syncthreads();
  return ldexpf(1.f, e);
}

}  // namespace attnkit::gpu
