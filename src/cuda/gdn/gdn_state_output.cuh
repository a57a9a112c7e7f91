// Stages 4 and 5 fused, for the whole forward: the sequential state pass also writes each chunk's
// output, so the per-chunk states h and V_new never go through device memory (the separate stages,
// gdn_state.cuh and gdn_output.cuh, serve the public stage ops that must write them). The intra
// stage supplies P = tril(Q K^T (.) Gamma) per (chunk, value head), so this kernel, whose chunks
// run one after another, does only the products that need the state.
//
// One CTA per (sequence, value head, 32-column slice of V), 16 warps, the 128 x 32 state slice in
// fp32 registers. Per chunk, with S the state before it:
//   phase A  v_new = u - W S (S as hi + lo halves), O_s = Q S;
//   phase B  S = exp(g_last) S + K^T diag(exp(g_last - g)) v_new (hi + lo),
//            O = scale (exp(g) (.) O_s + P v_new), staged in smem and written at the next chunk.
// Q S uses the 16-bit rounding of S and P v_new the 16-bit v_new, exactly what the separate output
// stage reads from h and V_new.
//
// Two barriers per chunk: the tiles of chunk c + 1 are requested right after the barrier that
// opens chunk c (every warp has finished chunk c - 1, whose buffer they reuse).
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
  T ws[2][kChunk * kLdT];
  T ks[2][kChunk * kLdT];
  T qs[2][kChunk * kLdT];
  T ps[2][kChunk * kLdP];
  T us[2][kChunk * kLdS];
  float gc[2][kChunk];
  T shi[kHead * kLdS];
  T slo[kHead * kLdS];
  T vhi[kChunk * kLdS];  // exp(g_last - g) v_new, hi + lo: the state update's operand
  T vlo[kChunk * kLdS];
  T vn[kChunk * kLdS];   // v_new rounded to 16 bits: the output's operand
  T os[kChunk * kLdS];   // the chunk's output slice, written out by 16-byte rows
};

// 16-byte cp.async of this thread's pieces of one chunk's tiles. The pieces a thread copies are
// fixed for the whole sequence; only the chunk's first row moves.
template <typename T>
struct ChunkLoader {
  int wr, wc;  // W/K/Q: rows wr and wr + 32, columns wc .. wc + 7
  int ur, uc;  // U slice (threads < 256)
  int pr, pc;  // P
  __device__ void init(int tid) {
    wr = tid >> 4;
    wc = (tid & 15) * 8;
    ur = tid >> 2;
    uc = (tid & 3) * 8;
    pr = tid >> 3;
    pc = (tid & 7) * 8;
  }
};

// Warp roles: S tile rows 16 (w % 8), columns 16 (w / 8); v_new and O tile rows 16 (w % 4),
// columns 8 (w / 4).
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
  const int pstrip = warp & 3;

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
  const T* wbase = static_cast<const T*>(p.w.p) + batch * p.w.sb + hv * p.w.sh;
  const T* kbase = static_cast<const T*>(p.k.p) + batch * p.k.sb + hq * p.k.sh;
  const T* qbase = static_cast<const T*>(p.q.p) + batch * p.q.sb + hq * p.q.sh;
  const T* ubase = static_cast<const T*>(p.u.p) + batch * p.u.sb + hv * p.u.sh + v0;
  const T* pbase = static_cast<const T*>(p.pm.p) + batch * p.pm.sb + hv * p.pm.sh;
  const float* gbase = static_cast<const float*>(p.g_cum.p) + batch * p.g_cum.sb + hv * p.g_cum.sh;
  T* obase = static_cast<T*>(p.o.p) + batch * p.o.sb + hv * p.o.sh + v0;
  ChunkLoader<T> ld;
  ld.init(tid);
  auto issue = [&](int64_t ci, int b) {
    const int64_t row0 = s0 + ci * kChunk;
    const int len = chunk_len(ci);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = ld.wr + 32 * h;
      const bool ok = r < len;
      const int64_t rr = ok ? row0 + r : row0;
      cp_async16(&sm.ws[b][r * kLdT + ld.wc], wbase + rr * p.w.st + ld.wc, ok);
      cp_async16(&sm.ks[b][r * kLdT + ld.wc], kbase + rr * p.k.st + ld.wc, ok);
      cp_async16(&sm.qs[b][r * kLdT + ld.wc], qbase + rr * p.q.st + ld.wc, ok);
    }
    {
      const bool ok = ld.pr < len;
      const int64_t rr = ok ? row0 + ld.pr : row0;
      cp_async16(&sm.ps[b][ld.pr * kLdP + ld.pc], pbase + rr * p.pm.st + ld.pc, ok);
    }
    if (tid < 256) {
      const bool ok = ld.ur < len;
      const int64_t rr = ok ? row0 + ld.ur : row0;
      cp_async16(&sm.us[b][ld.ur * kLdS + ld.uc], ubase + rr * p.u.st + ld.uc, ok);
    } else if (tid < 256 + kChunk) {
      const int r = tid - 256;
      const bool ok = r < len;
      cp_async4(&sm.gc[b][r], gbase + (ok ? row0 + r : row0) * p.g_cum.st, ok);  // rows past len read 0
    }
    cp_async_commit();
  };
  // The output slice of the chunk before, staged in sm.os: 64 rows x 4 pieces of 16 bytes.
  const bool o_vec = (reinterpret_cast<uintptr_t>(p.o.p) & 15) == 0 && p.o.sb % 8 == 0 && p.o.st % 8 == 0 &&
                     p.o.sh % 8 == 0;
  auto flush = [&](int64_t ci) {
    if (tid >= 256) return;
    const int r = tid >> 2, c = (tid & 3) * 8;
    if (r >= chunk_len(ci)) return;
    T* dst = obase + (s0 + ci * kChunk + r) * p.o.st + c;
    if (o_vec) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(&sm.os[r * kLdS + c]);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = sm.os[r * kLdS + c + e];
    }
  };

  if (nchunks > 0) issue(0, 0);
  for (int64_t ci = 0; ci < nchunks; ++ci) {
    const int b = static_cast<int>(ci & 1);
    const int len = chunk_len(ci);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int r = srow0 + g + h2 * 8, col = scol0 + nt * 8 + 2 * t;
        T h0, l0, h1, l1;
        split_hi_lo(S[nt][2 * h2], &h0, &l0);
        split_hi_lo(S[nt][2 * h2 + 1], &h1, &l1);
        *reinterpret_cast<uint32_t*>(&sm.shi[r * kLdS + col]) = pack2(h0, h1);
        *reinterpret_cast<uint32_t*>(&sm.slo[r * kLdS + col]) = pack2(l0, l1);
      }
    cp_async_wait<0>();
    __syncthreads();
    if (ci + 1 < nchunks) issue(ci + 1, b ^ 1);
    if (ci > 0) flush(ci - 1);
    const float* gc = sm.gc[b];
    const float glast = gc[len - 1];

    // Phase A: hi and lo products accumulate apart (two short dependency chains, not one long).
    float vh[4] = {0.f, 0.f, 0.f, 0.f}, vl[4] = {0.f, 0.f, 0.f, 0.f}, os[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < kHead / 16; ++ks) {
      uint32_t aw[4], aq[4], bh[2], bl[2];
      load_a_row_lm(aw, sm.ws[b], kLdT, vrow0, ks * 16, lane);
      load_a_row_lm(aq, sm.qs[b], kLdT, vrow0, ks * 16, lane);
      load_b_kn_x1(bh, sm.shi, kLdS, ks * 16, vcol0, lane);
      load_b_kn_x1(bl, sm.slo, kLdS, ks * 16, vcol0, lane);
      mma16816<T>(vh, aw, bh);
      mma16816<T>(vl, aw, bl);
      mma16816<T>(os, aq, bh);
    }
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      const int r = vrow0 + g + h2 * 8, col = vcol0 + 2 * t;
      const uint32_t uu = *reinterpret_cast<const uint32_t*>(&sm.us[b][r * kLdS + col]);
      T u0, u1;
      *reinterpret_cast<uint16_t*>(&u0) = static_cast<uint16_t>(uu & 0xffffu);
      *reinterpret_cast<uint16_t*>(&u1) = static_cast<uint16_t>(uu >> 16);
      const float x0 = to_f(u0) - (vh[2 * h2] + vl[2 * h2]);
      const float x1 = to_f(u1) - (vh[2 * h2 + 1] + vl[2 * h2 + 1]);
      *reinterpret_cast<uint32_t*>(&sm.vn[r * kLdS + col]) = pack2(from_f<T>(x0), from_f<T>(x1));
      const float sc = r < len ? __expf(glast - gc[r]) : 0.f;
      T h0, l0, h1, l1;
      split_hi_lo(x0 * sc, &h0, &l0);
      split_hi_lo(x1 * sc, &h1, &l1);
      *reinterpret_cast<uint32_t*>(&sm.vhi[r * kLdS + col]) = pack2(h0, h1);
      *reinterpret_cast<uint32_t*>(&sm.vlo[r * kLdS + col]) = pack2(l0, l1);
    }
    __syncthreads();

    // Phase B: the state update first (the next chunk waits on it), then this chunk's output.
    const float decay = __expf(glast);
    float Sl[2][4] = {};
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
      mma16816<T>(Sl[0], a, bl);
      mma16816<T>(S[1], a, bh + 2);
      mma16816<T>(Sl[1], a, bl + 2);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] += Sl[nt][e];
    {
      const int r0 = vrow0 + g, r1 = r0 + 8;
      const float e0 = __expf(gc[r0]), e1 = __expf(gc[r1]);
      float o[4] = {os[0] * e0, os[1] * e0, os[2] * e1, os[3] * e1};
#pragma unroll
      for (int kb = 0; kb < kChunk / 16; ++kb) {
        if (kb > pstrip) break;  // P is zero right of the diagonal block
        uint32_t a[4], bv[2];
        load_a_row_lm(a, sm.ps[b], kLdP, vrow0, kb * 16, lane);
        load_b_kn_x1(bv, sm.vn, kLdS, kb * 16, vcol0, lane);
        mma16816<T>(o, a, bv);
      }
      const int col = vcol0 + 2 * t;
      *reinterpret_cast<uint32_t*>(&sm.os[r0 * kLdS + col]) =
          pack2(from_f<T>(p.scale * o[0]), from_f<T>(p.scale * o[1]));
      *reinterpret_cast<uint32_t*>(&sm.os[r1 * kLdS + col]) =
          pack2(from_f<T>(p.scale * o[2]), from_f<T>(p.scale * o[3]));
    }
  }
  __syncthreads();
  if (nchunks > 0) flush(nchunks - 1);
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
  if (p.q.dt != dt || p.k.dt != dt || p.w.dt != dt || p.u.dt != dt || p.pm.dt != dt || p.o.dt != dt ||
      p.g_cum.dt != 0)
    return Status::Internal("gdn fused state/output: q, k, w, u, P and o must share the 16-bit dtype, g_cum fp32");
  // The tiles move by 16-byte pieces (the adapters check q and k; w, u and P are the forward's own
  // contiguous scratch). o may have any layout: it is written by elements when it is not aligned.
  const auto al16 = [](const Tok& x) {
    return (reinterpret_cast<uintptr_t>(x.p) & 15) == 0 && x.sb % 8 == 0 && x.st % 8 == 0 && x.sh % 8 == 0;
  };
  if (!al16(p.w) || !al16(p.u) || !al16(p.pm))
    return Status::Internal("gdn fused state/output: w, u and P need 16-byte aligned rows");
  const size_t smem = sizeof(StateOutSmem<T>);
  dim3 grid(kHead / kStateBV, p.HV, L.N);
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(state_output_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  state_output_kernel<T><<<grid, kSoThreads, smem, s>>>(p, L);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn fused state pass + output");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
