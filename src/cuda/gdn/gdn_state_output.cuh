// Stages 4 and 5 fused, for the whole forward: the sequential state pass also writes each chunk's
// output, so the per-chunk states h and V_new never go through device memory (the separate stages,
// gdn_state.cuh and gdn_output.cuh, serve the public stage ops that must write them). The intra
// stage supplies P = tril(Q K^T (.) Gamma) per (chunk, value head).
//
// One CTA per (sequence, value head, 32-column slice of V), twelve warps in two roles. The chunk
// loop is latency bound (one CTA per SM), so the recurrence is spread over eight warps and the
// chunk output runs beside it instead of lengthening it:
// - State warps 0-7 own the state slice, held transposed, S^T (32 x 128), in mma accumulator
//   registers: warp (vr, kq) = (w % 2, w / 2) owns S^T rows 16 vr .. + 15 (value columns) x
//   columns 32 kq .. + 31 (key rows). Held that way the state is already the A operand of W S.
//   Per chunk:
//     v_new^T = U^T - S^T W^T: each warp's partial over its 32 keys goes to shared memory; warp kq
//       then sums the four partials of chunk rows 16 kq .. + 15 and writes v_new (16-bit, for the
//       output warps) and v~ = diag(exp(g_last - g)) v_new as hi + lo 16-bit halves;
//     S^T = exp(g_last) S^T + v~^T K, with v~^T read back by ldmatrix (so the state keeps ~fp32
//       accuracy: both S and v~ enter the tensor cores as hi + lo halves).
//   At the end of the chunk they publish the next chunk's S (16-bit).
// - Output warps 8-11, warp (vr, rh), compute the chunk's output for value rows 16 vr .. + 15 and
//   chunk rows 32 rh .. + 31: O^T = scale (S^T Q^T diag(exp(g)) + v_new^T P^T), S^T Q^T while the
//   state warps compute v_new, then v_new^T P^T once it is published; the output is staged in
//   shared memory and written by 16-byte rows at the next chunk.
// O uses the 16-bit rounding of S and v_new, as the separate output stage does with h and V_new.
//
// Per chunk: one block barrier (the chunk's tiles are in, the previous chunk is done by every
// warp; the next chunk's tiles start loading), two named barriers among the state warps (partials
// written; v~ complete) and one through which the state warps hand v_new to the output warps.
#pragma once

#include "cuda/common/named_barrier.cuh"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_state.cuh"

namespace attnkit::gdn_cuda {

constexpr int kSoStateThreads = 256;
constexpr int kSoThreads = kSoStateThreads + 128;
constexpr int kSoBarPartial = 1;  // state warps: v_new partials written (256 threads)
constexpr int kSoBarVnew = 2;     // v_new handed to the output warps (256 arrive + 128 wait)
constexpr int kSoBarVt = 3;       // state warps: every quarter of v~ written (256 threads)

template <typename T>
struct StateOutSmem {
  static constexpr int kLdT = kHead + 8;
  static constexpr int kLdP = kChunk + 8;
  T ws[2][kChunk * kLdT];  // double-buffered: chunk c + 1 loads while chunk c computes
  T ks[2][kChunk * kLdT];
  T qs[2][kChunk * kLdT];
  T ps[2][kChunk * kLdP];
  T us[2][kChunk * kLdS];
  float gc[2][kChunk];
  T sT[2][kStateBV * kLdT];   // S^T (16-bit) at the start of chunk c, in buffer c % 2
  T vT[kStateBV * kLdP];      // v_new^T (16-bit) of the current chunk
  T vhi[kStateBV * kLdP];     // v~^T = (diag(exp(g_last - g)) v_new)^T, hi and lo 16-bit halves
  T vlo[kStateBV * kLdP];
  float4 part[2][4][8][32];   // [vr][kq][chunk-row tile][lane]: partial W S over 32 keys
  T os[kChunk * kLdS];        // the chunk's output slice
};

// Two fp32 values as packed hi and lo 16-bit halves (x = hi + lo to ~16 bits).
template <typename T>
__device__ __forceinline__ void split2(float x0, float x1, uint32_t* hi, uint32_t* lo) {
  T h0, l0, h1, l1;
  split_hi_lo(x0, &h0, &l0);
  split_hi_lo(x1, &h1, &l1);
  *hi = pack2(h0, h1);
  *lo = pack2(l0, l1);
}

// A state warp's S^T slice (16 value rows x 32 keys), rounded to 16 bits, into sT.
template <typename T>
__device__ __forceinline__ void publish_state(T* sT, const float (&ST)[4][4], int vw, int key0, int g, int t) {
  constexpr int kLdT = kHead + 8;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<uint32_t*>(&sT[(vw + g + 8 * h) * kLdT + key0 + 8 * nt + 2 * t]) =
          pack2(from_f<T>(ST[nt][2 * h]), from_f<T>(ST[nt][2 * h + 1]));
}

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
  const bool state_warp = tid < kSoStateThreads;
  const int ot = tid - kSoStateThreads;  // output warps' thread index, 0 .. 127
  const int vr = warp & 1, vw = 16 * vr;
  const int kq = (warp >> 1) & 3;        // state warps: key quarter, and the chunk rows it reduces
  const int rh = (warp >> 1) & 1;        // output warps: half of the chunk rows
  const int key0 = 32 * kq;

  // State warps: ST[nt][e] = S[key0 + 8 nt + 2 t + (e & 1)][v0 + vw + g + 8 (e >> 1)]
  const int64_t init_row = p.init.row(n), fin_row = p.fin.row(n);  // -1: no state
  float ST[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int k = key0 + 8 * nt + 2 * t + (e & 1), v = v0 + vw + g + 8 * (e >> 1);
      ST[nt][e] = state_warp && init_row >= 0
                      ? ld_any(p.init.p, 0, p.init.at(init_row, hv, k, v))
                      : 0.f;
    }
  if (state_warp) publish_state(sm.sT[0], ST, vw, key0, g, t);  // read after the loop's first barrier

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
  // 16-byte cp.async pieces, all issued by the output warps: the state warps' instruction stream
  // is the chunk loop's critical path. Rows past the chunk's end are zero-filled (K must be: the
  // state update multiplies its rows by zeros, and 0 * garbage need not be 0).
  auto issue = [&](int64_t ci, int b) {
    const int64_t row0 = s0 + ci * kChunk;
    const int len = chunk_len(ci);
    if (!state_warp) {
      const int c = (ot & 15) * 8;
#pragma unroll
      for (int h = 0; h < 8; ++h) {
        const int r = (ot >> 4) + 8 * h;
        const bool ok = r < len;
        const int64_t rr = ok ? row0 + r : row0;
        cp_async16(&sm.ws[b][r * kLdT + c], wbase + rr * p.w.st + c, ok);
        cp_async16(&sm.ks[b][r * kLdT + c], kbase + rr * p.k.st + c, ok);
        cp_async16(&sm.qs[b][r * kLdT + c], qbase + rr * p.q.st + c, ok);
      }
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int r = (ot >> 3) + 16 * h, c8 = (ot & 7) * 8;
        const bool ok = r < len;
        const int64_t rr = ok ? row0 + r : row0;
        cp_async16(&sm.ps[b][r * kLdP + c8], pbase + rr * p.pm.st + c8, ok);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = (ot >> 2) + 32 * h, c4 = (ot & 3) * 8;
        const bool ok = r < len;
        const int64_t rr = ok ? row0 + r : row0;
        cp_async16(&sm.us[b][r * kLdS + c4], ubase + rr * p.u.st + c4, ok);
      }
      if (ot < kChunk) {
        const bool ok = ot < len;
        cp_async4(&sm.gc[b][ot], gbase + (ok ? row0 + ot : row0) * p.g_cum.st, ok);  // 0 past len
      }
    }
    cp_async_commit();
  };
  const bool o_vec = (reinterpret_cast<uintptr_t>(p.o.p) & 15) == 0 && p.o.sb % 8 == 0 && p.o.st % 8 == 0 &&
                     p.o.sh % 8 == 0;
  // The staged output slice of chunk ci (64 rows x 4 pieces of 16 bytes), by the output warps.
  auto flush = [&](int64_t ci) {
    const int len = chunk_len(ci);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (ot >> 2) + 32 * h, c = (ot & 3) * 8;
      if (r >= len) continue;
      T* dst = obase + (s0 + ci * kChunk + r) * p.o.st + c;
      if (o_vec) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(&sm.os[r * kLdS + c]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = sm.os[r * kLdS + c + e];
      }
    }
  };

  if (nchunks > 0) issue(0, 0);
  for (int64_t ci = 0; ci < nchunks; ++ci) {
    const int b = static_cast<int>(ci & 1);
    const int len = chunk_len(ci);
    cp_async_wait<0>();
    __syncthreads();  // chunk ci's tiles and S are in; every warp is done with chunk ci - 1
    if (ci + 1 < nchunks) issue(ci + 1, b ^ 1);
    const float* gc = sm.gc[b];
    const float glast = gc[len - 1];

    if (state_warp) {
      // Partial v_new^T (before U) over this warp's 32 keys; chunk rows are the n dim.
      float VN[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) VN[nt][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        uint32_t ah[4], al[4];
        split2<T>(ST[2 * ks][0], ST[2 * ks][1], &ah[0], &al[0]);
        split2<T>(ST[2 * ks][2], ST[2 * ks][3], &ah[1], &al[1]);
        split2<T>(ST[2 * ks + 1][0], ST[2 * ks + 1][1], &ah[2], &al[2]);
        split2<T>(ST[2 * ks + 1][2], ST[2 * ks + 1][3], &ah[3], &al[3]);
#pragma unroll
        for (int j2 = 0; j2 < 4; ++j2) {
          uint32_t bw[4];
          load_b_nk_x2(bw, sm.ws[b], kLdT, key0 + 16 * ks, 16 * j2, lane);
          mma16816<T>(VN[2 * j2], ah, bw);
          mma16816<T>(VN[2 * j2 + 1], ah, bw + 2);
          mma16816<T>(VN[2 * j2], al, bw);
          mma16816<T>(VN[2 * j2 + 1], al, bw + 2);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        sm.part[vr][kq][nt][lane] = make_float4(VN[nt][0], VN[nt][1], VN[nt][2], VN[nt][3]);
      gpu::named_barrier_sync(kSoBarPartial, kSoStateThreads);
      // This warp's quarter: chunk-row tiles 2 kq and 2 kq + 1 (rows 16 kq .. + 15), the four key
      // quarters summed in a fixed order. Element e of tile nt: value row vw + g + 8 (e >> 1),
      // chunk row 8 nt + 2 t + (e & 1).
      const T* ub = sm.us[b];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int nt = 2 * kq + j;
        float4 a = sm.part[vr][0][nt][lane];
#pragma unroll
        for (int src = 1; src < 4; ++src) {
          const float4 o = sm.part[vr][src][nt][lane];
          a.x += o.x;
          a.y += o.y;
          a.z += o.z;
          a.w += o.w;
        }
        const float ws4[4] = {a.x, a.y, a.z, a.w};
        float vn[4], vt[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 8 * nt + 2 * t + (e & 1), v = vw + g + 8 * (e >> 1);
          const bool ok = row < len;
          vn[e] = ok ? to_f(ub[row * kLdS + v]) - ws4[e] : 0.f;  // v_new = u - W S, 0 past len
          vt[e] = ok ? vn[e] * __expf(glast - gc[row]) : 0.f;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int at = (vw + g + 8 * h) * kLdP + 8 * nt + 2 * t;
          uint32_t hi, lo;
          split2<T>(vt[2 * h], vt[2 * h + 1], &hi, &lo);
          *reinterpret_cast<uint32_t*>(&sm.vhi[at]) = hi;
          *reinterpret_cast<uint32_t*>(&sm.vlo[at]) = lo;
          *reinterpret_cast<uint32_t*>(&sm.vT[at]) = pack2(from_f<T>(vn[2 * h]), from_f<T>(vn[2 * h + 1]));
        }
      }
      gpu::named_barrier_arrive(kSoBarVnew, kSoThreads);
      gpu::named_barrier_sync(kSoBarVt, kSoStateThreads);

      // State update: S^T = exp(g_last) S^T + v~^T K over the chunk rows (k dim), this warp's keys (n).
      const float decay = __expf(glast);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) ST[nt][e] *= decay;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t ah[4], al[4];
        load_a_row_lm(ah, sm.vhi, kLdP, vw, 16 * ks, lane);
        load_a_row_lm(al, sm.vlo, kLdP, vw, 16 * ks, lane);
#pragma unroll
        for (int j2 = 0; j2 < 2; ++j2) {
          uint32_t bk[4];
          load_b_kn_x2(bk, sm.ks[b], kLdT, 16 * ks, key0 + 16 * j2, lane);
          mma16816<T>(ST[2 * j2], ah, bk);
          mma16816<T>(ST[2 * j2 + 1], ah, bk + 2);
          mma16816<T>(ST[2 * j2], al, bk);
          mma16816<T>(ST[2 * j2 + 1], al, bk + 2);
        }
      }
      publish_state(sm.sT[b ^ 1], ST, vw, key0, g, t);  // read at the next chunk, after its barrier
    } else {
      if (ci > 0) flush(ci - 1);
      // O_s^T = S^T Q^T for value rows vw .. + 15 and chunk rows 32 rh .. + 31, over all 128 keys.
      float O[4][4];
#pragma unroll
      for (int q = 0; q < 4; ++q) O[q][0] = O[q][1] = O[q][2] = O[q][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kHead / 16; ++ks) {
        uint32_t a[4];
        load_a_row_lm(a, sm.sT[b], kLdT, vw, 16 * ks, lane);
#pragma unroll
        for (int q2 = 0; q2 < 2; ++q2) {
          uint32_t bq[4];
          load_b_nk_x2(bq, sm.qs[b], kLdT, 16 * ks, 32 * rh + 16 * q2, lane);
          mma16816<T>(O[2 * q2], a, bq);
          mma16816<T>(O[2 * q2 + 1], a, bq + 2);
        }
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = 32 * rh + 8 * q + 2 * t;
        const float e0 = __expf(gc[row]), e1 = __expf(gc[row + 1]);
        O[q][0] *= e0;
        O[q][1] *= e1;
        O[q][2] *= e0;
        O[q][3] *= e1;
      }
      gpu::named_barrier_sync(kSoBarVnew, kSoThreads);  // v_new^T is in sm.vT
      // + v_new^T P^T (P zero right of the diagonal): chunk rows 16 ks .. of v_new^T as the k dim.
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if (ks >= 2 * (rh + 1)) break;
        uint32_t a[4];
        load_a_row_lm(a, sm.vT, kLdP, vw, 16 * ks, lane);
#pragma unroll
        for (int q2 = 0; q2 < 2; ++q2) {
          uint32_t bp[4];
          load_b_nk_x2(bp, sm.ps[b], kLdP, 16 * ks, 32 * rh + 16 * q2, lane);
          mma16816<T>(O[2 * q2], a, bp);
          mma16816<T>(O[2 * q2 + 1], a, bp + 2);
        }
      }
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 32 * rh + 8 * q + 2 * t + (e & 1), v = vw + g + 8 * (e >> 1);
          sm.os[row * kLdS + v] = from_f<T>(p.scale * O[q][e]);
        }
    }
  }
  __syncthreads();
  if (nchunks > 0 && !state_warp) flush(nchunks - 1);
  if (fin_row >= 0 && state_warp) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = key0 + 8 * nt + 2 * t + (e & 1), v = v0 + vw + g + 8 * (e >> 1);
        static_cast<float*>(p.fin.p)[p.fin.at(fin_row, hv, k, v)] = ST[nt][e];
      }
  }
}

template <typename T>
Status launch_state_output_t(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) {
  constexpr int dt = DtCode<T>::value;
  if (p.q.dt != dt || p.k.dt != dt || p.w.dt != dt || p.u.dt != dt || p.pm.dt != dt || p.o.dt != dt ||
      p.g_cum.dt != 0 || (p.init.defined() && p.init.dt != 0) || (p.fin.defined() && p.fin.dt != 0))
    return Status::Internal("gdn fused state/output: q, k, w, u, P and o must share the 16-bit dtype; g_cum and states fp32");
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
