// T = (I + A)^-1 for the strictly lower 64 x 64 fp32 A, with the off-diagonal block products on
// tensor cores (mma.sync m16n8k8 TF32, sm_80 and later) in 3xTF32: each operand split into its
// TF32 part and the remainder, three products summed (the small x small one dropped), which keeps
// the products near fp32 accuracy.
// Same blocks and phases as invert_unit_lower (gdn_intra.cuh), which does these products with
// FFMA: there, each warp's 16 x 8 output took 64 FFMA and 24 shared loads per 16-deep block, and
// the sm90 intra kernel was bound by shared-memory wavefronts, most of them the inverse's
// products (ncu).
// Here one warp takes a whole 16 x 16 output block (12 mma, 12 loads per 16-deep block), so the
// inverse needs one warpgroup and the other can work beside it.
#pragma once

#include <cute/arch/mma_sm80.hpp>

#include <cstdint>

#include "cuda/common/named_barrier.cuh"
#include "cuda/gdn/gdn_intra.cuh"

namespace attnkit::gdn_cuda {

// x = big + small: big is x's top 19 bits (a TF32 value), small the exact remainder, of which the
// tensor core reads the top 19 bits too (it ignores a TF32 register's low 13 bits, as CUTLASS's
// tfloat32_t rounding relies on), so ~2^-20 of x is lost. A mask and a subtraction.
struct Tf32Pair {
  uint32_t big, small;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const uint32_t b = __float_as_uint(x) & 0xffffe000u;
  return {b, __float_as_uint(x - __uint_as_float(b))};
}

// d (two m16n8 C fragments: columns 0-7, 8-15) += X (16 x 16 kNk, rows at x, stride kLX)
// Y (16 kNk x 16, rows at y, stride kLY), one warp. Within each 8-deep step, fragment position t
// takes k = 2t and t + 4 takes k = 2t + 1 (a permutation of the summed index that both operands
// share), so a lane's two A values of a row are one 8-byte load (conflict-free when kLX = 8 mod 32,
// 2-way at 4 mod 32), and the warp's B loads are conflict-free when kLY = 4 (mod 32). A's split
// serves both column halves.
template <int kLX, int kLY, int kNk>
__device__ __forceinline__ void block_mma(float (&d)[2][4], const float* x, const float* y, int lane) {
  using Mma = cute::SM80_16x8x8_F32TF32TF32F32_TN;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k8 = 0; k8 < 2 * kNk; ++k8) {
    const float2 xa = *reinterpret_cast<const float2*>(x + g * kLX + 8 * k8 + 2 * t);
    const float2 xb = *reinterpret_cast<const float2*>(x + (g + 8) * kLX + 8 * k8 + 2 * t);
    const Tf32Pair a[4] = {split_tf32(xa.x), split_tf32(xb.x), split_tf32(xa.y), split_tf32(xb.y)};
    const float* const yk = y + (8 * k8 + 2 * t) * kLY + g;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const Tf32Pair b[2] = {split_tf32(yk[8 * n]), split_tf32(yk[kLY + 8 * n])};
      float(&c)[4] = d[n];
      Mma::fma(c[0], c[1], c[2], c[3], a[0].small, a[1].small, a[2].small, a[3].small, b[0].big, b[1].big, c[0], c[1],
               c[2], c[3]);
      Mma::fma(c[0], c[1], c[2], c[3], a[0].big, a[1].big, a[2].big, a[3].big, b[0].small, b[1].small, c[0], c[1],
               c[2], c[3]);
      Mma::fma(c[0], c[1], c[2], c[3], a[0].big, a[1].big, a[2].big, a[3].big, b[0].big, b[1].big, c[0], c[1], c[2],
               c[3]);
    }
  }
}

// sc * d to the 16 x 16 block at dst (row stride kLD): lane rows g, g + 8, columns 2t, 2t + 1 of
// each 8-column half.
template <int kLD>
__device__ __forceinline__ void block_mma_store(float* dst, const float (&d)[2][4], float sc, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    *reinterpret_cast<float2*>(dst + g * kLD + 8 * n + 2 * t) = make_float2(sc * d[n][0], sc * d[n][1]);
    *reinterpret_cast<float2*>(dst + (g + 8) * kLD + 8 * n + 2 * t) = make_float2(sc * d[n][2], sc * d[n][3]);
  }
}

// A in `am` (row stride kLA; only its strictly lower entries are read), T into `tm` (row stride
// kLI; lower triangle and diagonal, the upper off-diagonal blocks hold scratch). Threads 0-127
// (one warpgroup: warp w owns one 16 x 16 output block a phase), which wrote A, meeting at named
// barrier `bar`; when it returns T is complete for them, other threads need a barrier of their own.
template <int kLA, int kLI>
__device__ __forceinline__ void invert_unit_lower_tc(const float* am, float* tm, int bar) {
  static_assert(kLI % 32 == 4, "conflict-free B-operand loads from tm (block_mma)");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto sync = [&] { gpu::named_barrier_sync_aligned(bar, 128); };  // warp-uniform call sites
  auto A = [&](int i, int j) { return am + 16 * i * kLA + 16 * j; };
  auto T = [&](int i, int j) { return tm + 16 * i * kLI + 16 * j; };
  sync();  // A is complete
  invert_diag_blocks<kLA, kLI>(am, tm);
  sync();
  float d[2][4] = {};
  if (warp < 2) {  // Level 1: T_{b+1,b}, b = 0 or 2, via M = A_{b+1,b} T_bb in scratch block (b, b+1).
    const int b = 2 * warp;
    block_mma<kLA, kLI, 1>(d, A(b + 1, b), T(b, b), lane);
    block_mma_store<kLI>(T(b, b + 1), d, 1.f, lane);
    __syncwarp();
    float e[2][4] = {};
    block_mma<kLI, kLI, 1>(e, T(b + 1, b + 1), T(b, b + 1), lane);
    block_mma_store<kLI>(T(b + 1, b), e, -1.f, lane);
  } else {  // X_i1 = A_i1 T_11 (i = 2, 3: the diagonal is all it needs) into scratch block (i - 2, 3).
    const int i = warp;
    block_mma<kLA, kLI, 1>(d, A(i, 1), T(1, 1), lane);
    block_mma_store<kLI>(T(i - 2, 3), d, 1.f, lane);
  }
  sync();
  float e[2][4] = {};
  if (warp < 2) {  // X_i0 = A_i0 T_00 + A_i1 T_10 (i = 2, 3) into scratch block (i - 2, 2).
    block_mma<kLA, kLI, 2>(e, A(warp + 2, 0), T(0, 0), lane);
    block_mma_store<kLI>(T(warp, 2), e, 1.f, lane);
  } else if (warp == 2) {  // T_21 = -T_22 X_21
    block_mma<kLI, kLI, 1>(e, T(2, 2), T(0, 3), lane);
    block_mma_store<kLI>(T(2, 1), e, -1.f, lane);
  } else {  // T_31 = -(T_32 X_21 + T_33 X_31): X_21 and X_31 are column block 3's rows 0-31.
    block_mma<kLI, kLI, 2>(e, T(3, 2), T(0, 3), lane);
    block_mma_store<kLI>(T(3, 1), e, -1.f, lane);
  }
  sync();
  float f[2][4] = {};
  if (warp == 0) {  // T_20 = -T_22 X_20
    block_mma<kLI, kLI, 1>(f, T(2, 2), T(0, 2), lane);
    block_mma_store<kLI>(T(2, 0), f, -1.f, lane);
  } else if (warp == 1) {  // T_30 = -(T_32 X_20 + T_33 X_30)
    block_mma<kLI, kLI, 2>(f, T(3, 2), T(0, 2), lane);
    block_mma_store<kLI>(T(3, 0), f, -1.f, lane);
  }
}

}  // namespace attnkit::gdn_cuda
