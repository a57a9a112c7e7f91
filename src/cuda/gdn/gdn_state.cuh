// Stage 4, the sequential state pass: one CTA per (sequence, value head, 32-column slice of V)
// walks the sequence's chunks in order with its 128 x 32 slice of the state in fp32 registers
// (mma accumulator layout). Per chunk: h[c] = S; v_new = u - W S; S = exp(g_last) S +
// K^T diag(exp(g_last - g)) v_new. S and the scaled v_new enter the tensor cores as hi + lo
// 16-bit halves, so the state keeps ~fp32 accuracy across long sequences.
#pragma once

#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {

constexpr int kStateBV = 32;
constexpr int kLdS = kStateBV + 8;

constexpr int kLdU = kStateBV + 1;  // fp32 u tile; a 16-bit u tile uses ld kLdS in the same bytes

template <typename T>
struct StateSmem {
  T ws[2][kChunk * (kHead + 8)];  // double-buffered: chunk c + 1 loads while chunk c computes
  T ks[2][kChunk * (kHead + 8)];
  float us[2][kChunk * kLdU];
  float gc[2][kChunk];
  T shi[kHead * kLdS];
  T slo[kHead * kLdS];
  T vhi[kChunk * kLdS];
  T vlo[kChunk * kLdS];
};

// 16 warps per CTA (4 per scheduler) hide the latency of the chunk-to-chunk dependency: warp w owns state
// rows 16 (w % 8) .. +15 x columns 16 (w / 8) .. +15, and v_new rows 16 (w % 4) x columns 8 (w / 4).
constexpr int kStateThreads16 = 512;

template <typename T>
__global__ void __launch_bounds__(kStateThreads16) state_kernel_w16(StateParams p, SeqLayout L) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  StateSmem<T>& sm = *reinterpret_cast<StateSmem<T>*>(smem_raw);
  constexpr int kLdT = kHead + 8;
  const int vb = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
  const int v0 = vb * kStateBV;
  const int hq = hv / (p.HV / p.H);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool u16 = p.u.dt == DtCode<T>::value;
  const int srow0 = 16 * (warp & 7), scol0 = 16 * (warp >> 3);
  const int vrow0 = 16 * (warp & 3), vcol0 = 8 * (warp >> 2);

  const int64_t init_row = p.init.row(n), fin_row = p.fin.row(n);  // -1: no state
  float S[2][4];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = srow0 + g + (e >= 2 ? 8 : 0), col = v0 + scol0 + nt * 8 + 2 * t + (e & 1);
      S[nt][e] = init_row >= 0 ? ld_any(p.init.p, 0, p.init.at(init_row, hv, r, col)) : 0.f;
    }

  int64_t s0, s1;
  seq_rows(L, n, &s0, &s1);
  const int64_t first = seq_first_chunk(L, n);
  const int64_t nchunks = (s1 - s0 + kChunk - 1) / kChunk;
  const int64_t batch = L.varlen ? 0 : n;
  auto chunk_len = [&](int64_t ci) {
    const int64_t left = s1 - (s0 + ci * kChunk);
    return static_cast<int>(left < kChunk ? left : kChunk);
  };
  auto issue = [&](int64_t ci, int b) {
    const int64_t row0 = s0 + ci * kChunk;
    const int len = chunk_len(ci);
    load_tile(sm.ws[b], kLdT, p.w.p, p.w.dt, batch * p.w.sb + row0 * p.w.st + hv * p.w.sh, p.w.st, len,
              kChunk, kHead);
    load_tile(sm.ks[b], kLdT, p.k.p, p.k.dt, batch * p.k.sb + row0 * p.k.st + hq * p.k.sh, p.k.st, len,
              kChunk, kHead);
    const int64_t ub = batch * p.u.sb + row0 * p.u.st + hv * p.u.sh + v0;
    if (u16)
      load_tile(reinterpret_cast<T*>(sm.us[b]), kLdS, p.u.p, p.u.dt, ub, p.u.st, len, kChunk, kStateBV);
    else
      load_tile_f32(sm.us[b], kLdU, p.u.p, p.u.dt, ub, p.u.st, len, kChunk, kStateBV);
    if (tid < kChunk) {
      const float* gp = static_cast<const float*>(p.g_cum.p) + batch * p.g_cum.sb + hv * p.g_cum.sh +
                        (tid < len ? (row0 + tid) * p.g_cum.st : row0 * p.g_cum.st);
      cp_async4(&sm.gc[b][tid], gp, tid < len);
    }
    cp_async_commit();
  };
  if (nchunks > 0) issue(0, 0);
  for (int64_t ci = 0; ci < nchunks; ++ci) {
    const int b = static_cast<int>(ci & 1);
    const int64_t chunk = first + ci;
    const int64_t row0 = s0 + ci * kChunk;
    const int len = chunk_len(ci);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int r = srow0 + g + h2 * 8, col = scol0 + nt * 8 + 2 * t;
        const float a = S[nt][2 * h2], bb = S[nt][2 * h2 + 1];
        if (p.h.defined() && chunk < p.h.rows)
          st_pair(p.h.p, p.h.dt, chunk * p.h.s0 + hv * p.h.sh + r * p.h.sk + v0 + col, a, bb);
        split_hi_lo(a, &sm.shi[r * kLdS + col], &sm.slo[r * kLdS + col]);
        split_hi_lo(bb, &sm.shi[r * kLdS + col + 1], &sm.slo[r * kLdS + col + 1]);
      }
    if (ci + 1 < nchunks) issue(ci + 1, b ^ 1);
    else cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float glast = sm.gc[b][len - 1];

    float vn[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < kHead / 16; ++ks) {
      uint32_t a[4], bh[2], bl[2];
      load_a_row(a, sm.ws[b], kLdT, vrow0, ks * 16, lane);
      load_b_kn_x1(bh, sm.shi, kLdS, ks * 16, vcol0, lane);
      load_b_kn_x1(bl, sm.slo, kLdS, ks * 16, vcol0, lane);
      mma16816<T>(vn, a, bh);
      mma16816<T>(vn, a, bl);
    }
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      const int r = vrow0 + g + h2 * 8, col = vcol0 + 2 * t;
      float x[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float uu = u16 ? to_f(reinterpret_cast<const T*>(sm.us[b])[r * kLdS + col + e])
                             : sm.us[b][r * kLdU + col + e];
        x[e] = uu - vn[2 * h2 + e];
      }
      if (r < len && p.v_new.defined())
        st_pair(p.v_new.p, p.v_new.dt,
                batch * p.v_new.sb + (row0 + r) * p.v_new.st + p.v_new.sh * hv + v0 + col, x[0], x[1]);
      const float sc = r < len ? __expf(glast - sm.gc[b][r]) : 0.f;
      split_hi_lo(x[0] * sc, &sm.vhi[r * kLdS + col], &sm.vlo[r * kLdS + col]);
      split_hi_lo(x[1] * sc, &sm.vhi[r * kLdS + col + 1], &sm.vlo[r * kLdS + col + 1]);
    }
    __syncthreads();
    const float decay = __expf(glast);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks) {
      uint32_t a[4], bh[4], bl[4];
      load_a_trans_lm(a, sm.ks[b], kLdT, srow0, ks * 16, lane);
      load_b_kn_x2(bh, sm.vhi, kLdS, ks * 16, scol0, lane);
      load_b_kn_x2(bl, sm.vlo, kLdS, ks * 16, scol0, lane);
      mma16816<T>(S[0], a, bh);
      mma16816<T>(S[0], a, bl);
      mma16816<T>(S[1], a, bh + 2);
      mma16816<T>(S[1], a, bl + 2);
    }
    __syncthreads();
  }
  if (fin_row >= 0) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int r = srow0 + g + h2 * 8, col = v0 + scol0 + nt * 8 + 2 * t;
        if (p.fin.sv == 1) {
          st_pair(p.fin.p, 0, p.fin.at(fin_row, hv, r, col), S[nt][2 * h2], S[nt][2 * h2 + 1]);
        } else {  // key-last: the pair's two columns are not adjacent
          static_cast<float*>(p.fin.p)[p.fin.at(fin_row, hv, r, col)] = S[nt][2 * h2];
          static_cast<float*>(p.fin.p)[p.fin.at(fin_row, hv, r, col + 1)] = S[nt][2 * h2 + 1];
        }
      }
  }
}

template <typename T>
Status launch_state_t(const StateParams& p, const SeqLayout& L, cudaStream_t s) {
  const size_t smem = sizeof(StateSmem<T>);
  dim3 grid(kHead / kStateBV, p.HV, L.N);
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(state_kernel_w16<T>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  state_kernel_w16<T><<<grid, kStateThreads16, smem, s>>>(p, L);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn state pass");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
