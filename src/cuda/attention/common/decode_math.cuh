// The math both decode kernels share (portable/decode_kernel.cuh, cp.async loads; and
// sm90/sm90_decode_kernel.cuh, TMA loads): a warp's work on one key tile. A CTA's rows are every
// (query token, query head of the GQA group) pair of one KV head, kRows = 16 * kMT of them; a
// warp owns one 16-key group of each kBlockN-key tile and half of Dv.
// Fragments follow mma.sync m16n8k16: lane l holds rows l/4 and l/4 + 8 of each 16-row MMA tile
// (row slot i = 2 * mt + half) and keys 2 (l%4), +1, +8, +9 of its 16-key group. Scores are in
// log2 units (the score mod folds in scale * log2 e).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// S = Q K^T over this warp's 16 keys: k_addr(kk) is the lane's ldmatrix address of dims
// [16 kk, 16 kk + 16) (B operand, n x k), q_frag(mt, kk, a) gives Q's A fragment.
template <typename T, int kMT, int kDqk, class KAddr, class QFrag>
__device__ __forceinline__ void decode_qk(KAddr k_addr, QFrag q_frag, float (&s)[kMT][2][4]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kDqk / 16; ++kk) {
    uint32_t bk[4];
    ldmatrix_x4(k_addr(kk), bk);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      uint32_t a[4];
      q_frag(mt, kk, a);
      MmaOp<T>::run(s[mt][0], a, bk[0], bk[1]);
      MmaOp<T>::run(s[mt][1], a, bk[2], bk[3]);
    }
  }
}

// Online softmax over the masked, scaled scores s: the running max and sum of each row slot, O
// rescaled where the max grew; s becomes P = exp2(s - max).
template <int kMT, int kNO>
__device__ __forceinline__ void decode_online_softmax(float (&s)[kMT][2][4],
                                                      float (&m_run)[2 * kMT],
                                                      float (&l_run)[2 * kMT],
                                                      float (&acc)[kMT][kNO][4]) {
#pragma unroll
  for (int i = 0; i < 2 * kMT; ++i) {
    const int mt = i / 2, h = i % 2;
    float mx = fmaxf(m_run[i], fmaxf(fmaxf(s[mt][0][2 * h], s[mt][0][2 * h + 1]),
                                     fmaxf(s[mt][1][2 * h], s[mt][1][2 * h + 1])));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_use = mx == -INFINITY ? 0.f : mx;
    const float alpha = exp2f(m_run[i] - m_use);
    m_run[i] = mx;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[mt][n][2 * h] = exp2f(s[mt][n][2 * h] - m_use);
      s[mt][n][2 * h + 1] = exp2f(s[mt][n][2 * h + 1] - m_use);
      sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
    }
    l_run[i] = l_run[i] * alpha + sum;
#pragma unroll
    for (int n = 0; n < kNO; ++n) {
      acc[mt][n][2 * h] *= alpha;
      acc[mt][n][2 * h + 1] *= alpha;
    }
  }
}

// P as the A fragments of P V (16-bit MmaT).
template <typename MmaT, int kMT>
__device__ __forceinline__ void decode_pack_p(const float (&s)[kMT][2][4], uint32_t (&pa)[kMT][4]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    pa[mt][0] = pack2<MmaT>(s[mt][0][0], s[mt][0][1]);
    pa[mt][1] = pack2<MmaT>(s[mt][0][2], s[mt][0][3]);
    pa[mt][2] = pack2<MmaT>(s[mt][1][0], s[mt][1][1]);
    pa[mt][3] = pack2<MmaT>(s[mt][1][2], s[mt][1][3]);
  }
}

// O += P V over this warp's 16 keys and kDvWarp columns: v_addr(nn) is the lane's ldmatrix.trans
// address of columns [16 nn, 16 nn + 16) of its half (B operand, k x n).
template <typename T, int kMT, int kDvWarp, class VAddr>
__device__ __forceinline__ void decode_pv(VAddr v_addr, const uint32_t (&pa)[kMT][4],
                                          float (&acc)[kMT][kDvWarp / 8][4]) {
#pragma unroll
  for (int nn = 0; nn < kDvWarp / 16; ++nn) {
    uint32_t bv[4];
    ldmatrix_x4_trans(v_addr(nn), bv);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      MmaOp<T>::run(acc[mt][2 * nn], pa[mt], bv[0], bv[1]);
      MmaOp<T>::run(acc[mt][2 * nn + 1], pa[mt], bv[2], bv[3]);
    }
  }
}

// This lane's O of slot i (16-bit caches: column pairs 2 (lane%4) of each n8 block) into the
// key groups' merge buffer, fp32 O [kKG][kRows][kDv] (row rr of key group kh).
template <int kRows, int kDv, int kDvWarp, int kMT>
__device__ __forceinline__ void decode_stash_o(float* red, int i, int rr, int kh, int dh, int lane,
                                               const float (&acc)[kMT][kDvWarp / 8][4]) {
  const int mt = i / 2, h = i % 2;
#pragma unroll
  for (int n = 0; n < kDvWarp / 8; ++n) {
    const int c = dh * kDvWarp + n * 8 + (lane % 4) * 2;
    *reinterpret_cast<float2*>(red + (kh * kRows + rr) * kDv + c) =
        make_float2(acc[mt][n][2 * h], acc[mt][n][2 * h + 1]);
  }
}

}  // namespace attnkit::gpu
