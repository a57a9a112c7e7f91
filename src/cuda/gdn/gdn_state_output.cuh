// Stages 4 and 5 fused, for the whole forward: the sequential state pass also writes each chunk's
// output, so the per-chunk states h and V_new never go through device memory (the separate stages,
// gdn_state.cuh and gdn_output.cuh, serve the public stage ops that must write them).
//
// One CTA per (sequence, value head, 32-column slice of V), 16 warps, the 128 x 32 state slice in
// fp32 registers. Per chunk, with S the state before it:
//   phase A  v_new = u - W S (S as hi + lo halves), P = tril(Q K^T (.) Gamma), O_s = Q S;
//   phase B  S = exp(g_last) S + K^T diag(exp(g_last - g)) v_new (hi + lo),
//            O = scale (exp(g) (.) O_s + P v_new) for the slice's 32 columns.
// Q S uses the 16-bit rounding of S and P v_new the 16-bit v_new, exactly what the separate output
// stage reads from h and V_new.
#pragma once

#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_state.cuh"

namespace attnkit::gdn_cuda {

constexpr int kSoThreads = 512;

template <typename T>
struct StateOutSmem {
  static constexpr int kLdT = kHead + 8;
  static constexpr int kLdP = kChunk + 8;
  T ws[2][kChunk * kLdT];  // double-buffered: chunk c + 1 loads while chunk c computes
  T ks[2][kChunk * kLdT];
  T qs[2][kChunk * kLdT];
  T us[2][kChunk * kLdS];
  float gc[2][kChunk];
  T shi[kHead * kLdS];
  T slo[kHead * kLdS];
  T vhi[kChunk * kLdS];  // exp(g_last - g) v_new, hi + lo: the state update's operand
  T vlo[kChunk * kLdS];
  T vn[kChunk * kLdS];   // v_new rounded to 16 bits: the output's operand
  T ps[kChunk * kLdP];
};

// Warp roles: S tile rows 16 (w % 8), columns 16 (w / 8); v_new and O tile rows 16 (w % 4),
// columns 8 (w / 4); P tile rows 16 (w % 4), columns 16 (w / 4) (only tiles on or below the
// diagonal are needed).
template <typename T>
__global__ void __launch_bounds__(kSoThreads, 1) state_output_kernel(StateOutParams p, SeqLayout L) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Sm = StateOutSmem<T>;
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw);
  constexpr int kLdT = Sm::kLdT, kLdP = Sm::kLdP;
  const int vb = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
  const int v0 = vb * kStateBV;
  const int hq = hv / (p.HV / p.H);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int srow0 = 16 * (warp & 7), scol0 = 16 * (warp >> 3);
  const int vrow0 = 16 * (warp & 3), vcol0 = 8 * (warp >> 2);
  const int pstrip = warp & 3, pblk = warp >> 2;
  const bool need_p = pblk <= pstrip;

  float S[2][4];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = srow0 + g + (e >= 2 ? 8 : 0), col = v0 + scol0 + nt * 8 + 2 * t + (e & 1);
      S[nt][e] = p.init.defined() ? ld_any(p.init.p, 0, n * p.init.s0 + hv * p.init.sh + r * p.init.sk + col)
                                  : 0.f;
    }

  int64_t s0, s1;
  seq_rows(L, n, &s0, &s1);
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
    load_tile(sm.qs[b], kLdT, p.q.p, p.q.dt, batch * p.q.sb + row0 * p.q.st + hq * p.q.sh, p.q.st, len,
              kChunk, kHead);
    load_tile(sm.us[b], kLdS, p.u.p, p.u.dt, batch * p.u.sb + row0 * p.u.st + hv * p.u.sh + v0, p.u.st, len,
              kChunk, kStateBV);
    if (tid < kChunk) {
      const float* gp = static_cast<const float*>(p.g_cum.p) + batch * p.g_cum.sb + hv * p.g_cum.sh +
                        (tid < len ? (row0 + tid) * p.g_cum.st : row0 * p.g_cum.st);
      cp_async4(&sm.gc[b][tid], gp, tid < len);  // rows past len read as 0
    }
    cp_async_commit();
  };
  if (nchunks > 0) issue(0, 0);
  for (int64_t ci = 0; ci < nchunks; ++ci) {
    const int b = static_cast<int>(ci & 1);
    const int64_t row0 = s0 + ci * kChunk;
    const int len = chunk_len(ci);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int r = srow0 + g + h2 * 8, col = scol0 + nt * 8 + 2 * t;
        split_hi_lo(S[nt][2 * h2], &sm.shi[r * kLdS + col], &sm.slo[r * kLdS + col]);
        split_hi_lo(S[nt][2 * h2 + 1], &sm.shi[r * kLdS + col + 1], &sm.slo[r * kLdS + col + 1]);
      }
    if (ci + 1 < nchunks) issue(ci + 1, b ^ 1);
    else cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* gc = sm.gc[b];
    const float glast = gc[len - 1];

    // Phase A.
    float vn[4] = {0.f, 0.f, 0.f, 0.f}, os[4] = {0.f, 0.f, 0.f, 0.f};
    float pa[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < kHead / 16; ++ks) {
      uint32_t aw[4], aq[4], bh[2], bl[2];
      load_a_row(aw, sm.ws[b], kLdT, vrow0, ks * 16, lane);
      load_a_row(aq, sm.qs[b], kLdT, vrow0, ks * 16, lane);
      load_b_kn_x1(bh, sm.shi, kLdS, ks * 16, vcol0, lane);
      load_b_kn_x1(bl, sm.slo, kLdS, ks * 16, vcol0, lane);
      mma16816<T>(vn, aw, bh);
      mma16816<T>(vn, aw, bl);
      mma16816<T>(os, aq, bh);
      if (need_p) {
        uint32_t bk0[2], bk1[2];
        load_b_nk(bk0, sm.ks[b], kLdT, ks * 16, 16 * pblk, lane);
        load_b_nk(bk1, sm.ks[b], kLdT, ks * 16, 16 * pblk + 8, lane);
        mma16816<T>(pa[0], aq, bk0);
        mma16816<T>(pa[1], aq, bk1);
      }
    }
    if (need_p) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
          const int i = vrow0 + g + h2 * 8, j = 16 * pblk + nt * 8 + 2 * t;
          const float gi = gc[i];
          const float x0 = (j <= i && i < len) ? pa[nt][2 * h2] * __expf(gi - gc[j]) : 0.f;
          const float x1 = (j + 1 <= i && i < len) ? pa[nt][2 * h2 + 1] * __expf(gi - gc[j + 1]) : 0.f;
          *reinterpret_cast<uint32_t*>(&sm.ps[i * kLdP + j]) = pack2(from_f<T>(x0), from_f<T>(x1));
        }
    }
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      const int r = vrow0 + g + h2 * 8, col = vcol0 + 2 * t;
      const T* ur = &sm.us[b][r * kLdS + col];
      const float x0 = to_f(ur[0]) - vn[2 * h2], x1 = to_f(ur[1]) - vn[2 * h2 + 1];
      *reinterpret_cast<uint32_t*>(&sm.vn[r * kLdS + col]) = pack2(from_f<T>(x0), from_f<T>(x1));
      const float sc = r < len ? __expf(glast - gc[r]) : 0.f;
      split_hi_lo(x0 * sc, &sm.vhi[r * kLdS + col], &sm.vlo[r * kLdS + col]);
      split_hi_lo(x1 * sc, &sm.vhi[r * kLdS + col + 1], &sm.vlo[r * kLdS + col + 1]);
    }
    __syncthreads();

    // Phase B: the state update first (the next chunk waits on it), then this chunk's output.
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
    {
      const int r0 = vrow0 + g, r1 = r0 + 8;
      const float e0 = __expf(gc[r0]), e1 = __expf(gc[r1]);
      float o[4] = {os[0] * e0, os[1] * e0, os[2] * e1, os[3] * e1};
#pragma unroll
      for (int kb = 0; kb < kChunk / 16; ++kb) {
        if (kb > pstrip) break;  // P is zero right of the diagonal block
        uint32_t a[4], bv[2];
        load_a_row(a, sm.ps, kLdP, vrow0, kb * 16, lane);
        load_b_kn_x1(bv, sm.vn, kLdS, kb * 16, vcol0, lane);
        mma16816<T>(o, a, bv);
      }
      const int64_t ob = batch * p.o.sb + row0 * p.o.st + hv * p.o.sh + v0 + vcol0 + 2 * t;
      if (r0 < len) st_pair(p.o.p, p.o.dt, ob + r0 * p.o.st, p.scale * o[0], p.scale * o[1]);
      if (r1 < len) st_pair(p.o.p, p.o.dt, ob + r1 * p.o.st, p.scale * o[2], p.scale * o[3]);
    }
    __syncthreads();
  }
  if (p.fin.defined()) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int r = srow0 + g + h2 * 8, col = v0 + scol0 + nt * 8 + 2 * t;
        st_pair(p.fin.p, 0, n * p.fin.s0 + hv * p.fin.sh + r * p.fin.sk + col, S[nt][2 * h2],
                S[nt][2 * h2 + 1]);
      }
  }
}

template <typename T>
Status launch_state_output_t(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) {
  constexpr int dt = DtCode<T>::value;
  if (p.q.dt != dt || p.k.dt != dt || p.w.dt != dt || p.u.dt != dt || p.o.dt != dt || p.g_cum.dt != 0)
    return Status::Internal("gdn fused state/output: q, k, w, u and o must share the 16-bit dtype, g_cum fp32");
  const size_t smem = sizeof(StateOutSmem<T>);
  dim3 grid(kHead / kStateBV, p.HV, L.N);
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(state_output_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  state_output_kernel<T><<<grid, kSoThreads, smem, s>>>(p, L);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn fused state pass + output");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
