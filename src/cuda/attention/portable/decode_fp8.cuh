// FP8 (e4m3) K / V in the portable decode kernel: the stages hold the cache's bytes (half the
// shared memory and half the DRAM reads of a 16-bit cache) and the MMA operands are widened to
// the query's type in registers, after ldmatrix.
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
// accumulator's n-block 2c holds the even dims of chunk c and 2c + 1 its odd dims.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/attention/portable/decode_fp8_layout.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// Two e4m3 values (low byte first) widened to two T values, exactly.
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_to(uint32_t x2);
template <>
__device__ __forceinline__ uint32_t e4m3x2_to<__half>(uint32_t x2) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x2 & 0xffffu), __NV_E4M3);
  return uint32_t{h.x} | (uint32_t{h.y} << 16);
}
template <>
__device__ __forceinline__ uint32_t e4m3x2_to<__nv_bfloat16>(uint32_t x2) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x2 & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return pack2<__nv_bfloat16>(f.x, f.y);
}
// The same, each value multiplied by its scale in fp32 and rounded to T.
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_scaled(uint32_t x2, float2 s) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x2 & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return pack2<T>(f.x * s.x, f.y * s.y);
}

// The B fragments of one k16 slab of K for two 8-key n-blocks: r holds K8[key][4t .. 4t+3] of
// the slab (ldmatrix of the e4m3 rows); b0 / b1 as MmaOp wants them.
template <typename T>
__device__ __forceinline__ void fp8_k_fragment(uint32_t r, uint32_t& b0, uint32_t& b1) {
  b0 = e4m3x2_to<T>(r);
  b1 = e4m3x2_to<T>(r >> 16);
}

// V's B fragments for one 16-dim chunk from ldmatrix.trans of keys 0-7 (lo) and 8-15 (hi):
// even[0..1] for dims 2g, odd[0..1] for dims 2g + 1. With kScaled, keys (2t, 2t+1) are multiplied
// by s_lo and keys (2t+8, 2t+9) by s_hi (per-token scales).
template <typename T, bool kScaled>
__device__ __forceinline__ void fp8_v_pairs(uint32_t lo, uint32_t hi, float2 s_lo, float2 s_hi,
                                            uint32_t (&even)[2], uint32_t (&odd)[2]) {
  // bytes (key 2t dim 2g, key 2t dim 2g+1, key 2t+1 dim 2g, key 2t+1 dim 2g+1) ->
  // (key 2t dim 2g, key 2t+1 dim 2g | key 2t dim 2g+1, key 2t+1 dim 2g+1)
  const uint32_t l = __byte_perm(lo, 0, kFp8VPairSelector), h = __byte_perm(hi, 0, kFp8VPairSelector);
  if constexpr (kScaled) {
    even[0] = e4m3x2_scaled<T>(l, s_lo);
    even[1] = e4m3x2_scaled<T>(h, s_hi);
    odd[0] = e4m3x2_scaled<T>(l >> 16, s_lo);
    odd[1] = e4m3x2_scaled<T>(h >> 16, s_hi);
  } else {
    even[0] = e4m3x2_to<T>(l);
    even[1] = e4m3x2_to<T>(h);
    odd[0] = e4m3x2_to<T>(l >> 16);
    odd[1] = e4m3x2_to<T>(h >> 16);
  }
}

}  // namespace attnkit::gpu
