// Where the FP8 decode path puts things (decode_fp8.cuh): plain index arithmetic (constexpr, so
// device code calls it under --expt-relaxed-constexpr), shared by the kernel and a CPU test that
// replays ldmatrix and mma.m16n8k16 lane by lane (tests/cpu/decode_fp8_layout_test.cpp).
#pragma once

#include <bit>
#include <cstdint>

namespace attnkit::gpu {

// The shared-memory pair slot (0..7) of Q's dim pair w (dims 2w, 2w+1) within a 16-dim slab: the
// MMA's k positions (2t, 2t+1) then hold dims (4t, 4t+1) and (2t+8, 2t+9) hold (4t+2, 4t+3),
// the order in which ldmatrix hands a lane K's e4m3 bytes.
constexpr int q_pair_slot(int w) { return (w & 1) ? 4 + (w >> 1) : (w >> 1); }

// Row (key, 0..15) and byte (0..31) of the 16-key x 32-dim K block that `lane` addresses for one
// ldmatrix.x4: matrices (keys 0-7, dims 0-15) (keys 0-7, 16-31) (keys 8-15, 0-15) (keys 8-15, 16-31).
constexpr int fp8_k_lane_key(int lane) { return ((lane >> 3) >> 1) * 8 + (lane & 7); }
constexpr int fp8_k_lane_byte(int lane) { return ((lane >> 3) & 1) * 16; }
// The same for V's ldmatrix.x4.trans over 16 keys x 32 dims: (keys 0-7, dims 0-15)
// (keys 8-15, 0-15) (keys 0-7, 16-31) (keys 8-15, 16-31).
constexpr int fp8_v_lane_key(int lane) { return ((lane >> 3) & 1) * 8 + (lane & 7); }
constexpr int fp8_v_lane_byte(int lane) { return ((lane >> 3) >> 1) * 16; }

// __byte_perm selector that turns ldmatrix.trans's (key 2t: dims 2g, 2g+1 | key 2t+1: dims 2g,
// 2g+1) into (dim 2g: keys 2t, 2t+1 | dim 2g+1: keys 2t, 2t+1).
inline constexpr uint32_t kFp8VPairSelector = 0x3120;

// The dim (0..15 within its 16-dim chunk) of accumulator element e (0..3) of a lane with
// t = lane % 4, in the n-block of the chunk's even (parity 0) or odd (1) dims.
constexpr int fp8_o_dim(int t, int e, int parity) { return 4 * t + 2 * (e & 1) + parity; }

// The exponent e by which bf16 queries are scaled down (q 2^-e) to become fp16 MMA operands
// (fp8_q_bf16_to_half): amax 2^-e lies in [2^14, 2^15) for the CTA's largest |q| = amax, so no
// value overflows fp16 and each one down to amax 2^-28 stays exact (smaller ones round to fp16
// subnormals, off by at most amax 2^-39). Clamped to [-100, 113] so that 2^e and 2^-e stay finite
// floats; 0 for amax 0, infinite or NaN.
constexpr int fp8_q_exponent(float amax) {
  const int biased = static_cast<int>((std::bit_cast<uint32_t>(amax) >> 23) & 0xffu);
  if (!(amax > 0.f) || biased == 0xff) return 0;
  const int e = biased - 126 - 15;  // amax = m 2^(biased - 126), m in [0.5, 1)
  return e < -100 ? -100 : e > 113 ? 113 : e;
}

}  // namespace attnkit::gpu
