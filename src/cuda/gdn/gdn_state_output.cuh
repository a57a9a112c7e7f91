// Stages 4 and 5 fused, for the whole forward: the sequential state pass also writes each chunk's
// output, so the per-chunk states h and V_new never go through device memory (the separate stages,
// gdn_state.cuh and gdn_output.cuh, serve the public stage ops that must write them). The intra
// stage supplies P = tril(Q K^T (.) Gamma) per (chunk, value head).
//
// One CTA per (sequence, value head, 32-column slice of V), eight warps in two roles, so that the
// chunk output runs beside the recurrence instead of lengthening it:
// - State warps 0-3 own the state slice, held transposed, S^T (32 x 128), in mma accumulator
//   registers: warp (vr, kh) = (w % 2, w / 2) owns S^T rows 16 vr .. + 15 (value columns) x columns
//   64 kh .. + 63 (key rows). Held that way the state is already the A operand of W S, and v_new,
//   computed as an accumulator, is the A operand of the state update. Per chunk:
//     v_new^T = U^T - S^T W^T, each warp over its 64 keys, summed with the partner warp (same vr)
//       through shared memory;
//     S^T = exp(g_last) S^T + v~^T K, v~ = diag(exp(g_last - g)) v_new (both as hi + lo 16-bit
//       halves for S and v~, so the state keeps ~fp32 accuracy).
//   They publish v_new (16-bit) mid-chunk and the next chunk's S (16-bit) at its end.
// - Output warps 4-7, warp (vr, rh), compute the chunk's output for value rows 16 vr .. + 15 and
//   chunk rows 32 rh .. + 31: O^T = scale (S^T Q^T diag(exp(g)) + v_new^T P^T), S^T Q^T while the
//   state warps compute v_new, then v_new^T P^T once it is published; the output is staged in
//   shared memory and written by 16-byte rows at the next chunk.
// O uses the 16-bit rounding of S and v_new, as the separate output stage does with h and V_new.
//
// Per chunk: one block barrier (the chunk's tiles are in, the previous chunk is done by every
// warp; the next chunk's tiles start loading), a named barrier among the state warps for the
// v_new exchange, and a named barrier through which the state warps hand v_new to the output warps.
#pragma once

#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_state.cuh"

namespace attnkit::gdn_cuda {

constexpr int kSoThreads = 256;
constexpr int kSoBarState = 1;   // the state warps' v_new exchange (128 threads)
constexpr int kSoBarVnew = 2;    // v_new handed to the output warps (256 threads)

__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

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
  T sT[2][kStateBV * kLdT];  // S^T (16-bit) at the start of chunk c, in buffer c % 2
  T vT[kStateBV * kLdP];     // v_new^T (16-bit) of the current chunk
  float4 xch[4][8 * 32];     // per state warp: its 8 partial v_new^T tiles
  T os[kChunk * kLdS];       // the chunk's output slice
  float scl[kChunk];         // exp(g_last - g_i), 0 past the chunk's end
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

// A state warp's S^T slice, rounded to 16 bits, into sT (row = value column, 16-byte padded rows).
template <typename T>
__device__ __forceinline__ void publish_state(T* sT, const float (&ST)[8][4], int vw, int k0, int g, int t) {
  constexpr int kLdT = kHead + 8;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<uint32_t*>(&sT[(vw + g + 8 * h) * kLdT + k0 + 8 * nt + 2 * t]) =
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
  const bool state_warp = warp < 4;
  const int vr = warp & 1, kh = (warp >> 1) & 1;  // kh: key half (state) or chunk-row half (output)
  const int vw = 16 * vr, k0 = 64 * kh;

  // State warps: ST[nt][e] = S[k0 + 8 nt + 2 t + (e & 1)][v0 + vw + g + 8 (e >> 1)]
  float ST[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int k = k0 + 8 * nt + 2 * t + (e & 1), v = v0 + vw + g + 8 * (e >> 1);
      ST[nt][e] = state_warp && p.init.defined()
                      ? ld_any(p.init.p, 0, n * p.init.s0 + hv * p.init.sh + k * p.init.sk + v)
                      : 0.f;
    }
  if (state_warp) publish_state(sm.sT[0], ST, vw, k0, g, t);  // read after the loop's first barrier

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
  // 16-byte cp.async pieces spread over all 256 threads; rows past the chunk's end are zero-filled
  // (K must be: the state update multiplies its rows by zeros, and 0 * garbage need not be 0).
  auto issue = [&](int64_t ci, int b) {
    const int64_t row0 = s0 + ci * kChunk;
    const int len = chunk_len(ci);
    const int c = (tid & 15) * 8;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int r = (tid >> 4) + 16 * h;
      const bool ok = r < len;
      const int64_t rr = ok ? row0 + r : row0;
      cp_async16(&sm.ws[b][r * kLdT + c], wbase + rr * p.w.st + c, ok);
      cp_async16(&sm.ks[b][r * kLdT + c], kbase + rr * p.k.st + c, ok);
      cp_async16(&sm.qs[b][r * kLdT + c], qbase + rr * p.q.st + c, ok);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (tid >> 3) + 32 * h, c8 = (tid & 7) * 8;
      const bool ok = r < len;
      const int64_t rr = ok ? row0 + r : row0;
      cp_async16(&sm.ps[b][r * kLdP + c8], pbase + rr * p.pm.st + c8, ok);
    }
    {
      const int r = tid >> 2, c4 = (tid & 3) * 8;
      const bool ok = r < len;
      const int64_t rr = ok ? row0 + r : row0;
      cp_async16(&sm.us[b][r * kLdS + c4], ubase + rr * p.u.st + c4, ok);
    }
    if (tid < kChunk) {
      const bool ok = tid < len;
      cp_async4(&sm.gc[b][tid], gbase + (ok ? row0 + tid : row0) * p.g_cum.st, ok);  // 0 past len
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
      const int r = ((tid - 128) >> 2) + 32 * h, c = (tid & 3) * 8;
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
      if (tid < kChunk) sm.scl[tid] = tid < len ? __expf(glast - gc[tid]) : 0.f;  // read after the exchange
      // Partial v_new^T (before U) over this warp's 64 keys; chunk rows are the n dim.
      float VN[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) VN[nt][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t ah[4], al[4];
        split2<T>(ST[2 * ks][0], ST[2 * ks][1], &ah[0], &al[0]);
        split2<T>(ST[2 * ks][2], ST[2 * ks][3], &ah[1], &al[1]);
        split2<T>(ST[2 * ks + 1][0], ST[2 * ks + 1][1], &ah[2], &al[2]);
        split2<T>(ST[2 * ks + 1][2], ST[2 * ks + 1][3], &ah[3], &al[3]);
#pragma unroll
        for (int j2 = 0; j2 < 4; ++j2) {
          uint32_t bw[4];
          load_b_nk_x2(bw, sm.ws[b], kLdT, k0 + 16 * ks, 16 * j2, lane);
          mma16816<T>(VN[2 * j2], ah, bw);
          mma16816<T>(VN[2 * j2 + 1], ah, bw + 2);
          mma16816<T>(VN[2 * j2], al, bw);
          mma16816<T>(VN[2 * j2 + 1], al, bw + 2);
        }
      }
      // Sum with the partner warp (same value rows, other 64 keys): a + b in either warp, so both
      // hold bit-identical v_new.
      float4* mine = sm.xch[warp];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) mine[nt * 32 + lane] = make_float4(VN[nt][0], VN[nt][1], VN[nt][2], VN[nt][3]);
      named_bar_sync(kSoBarState, 128);
      const float4* other = sm.xch[warp ^ 2];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float4 o = other[nt * 32 + lane];
        VN[nt][0] += o.x;
        VN[nt][1] += o.y;
        VN[nt][2] += o.z;
        VN[nt][3] += o.w;
      }
      // v_new = u - (W S) on rows < len, 0 past them. VN[nt][e]: value row vw + g + 8 (e >> 1),
      // chunk row 8 nt + 2 t + (e & 1).
      const T* ub = sm.us[b];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 8 * nt + 2 * t + (e & 1), v = vw + g + 8 * (e >> 1);
          VN[nt][e] = row < len ? to_f(ub[row * kLdS + v]) - VN[nt][e] : 0.f;
        }
      // Hand v_new^T (16-bit) to the output warps: each partner writes half of the chunk rows.
      // (Selects of values, not VN[4 * kh + q]: a run-time index would put VN in local memory.)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int nt = 4 * kh + q;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x0 = kh ? VN[4 + q][2 * h] : VN[q][2 * h];
          const float x1 = kh ? VN[4 + q][2 * h + 1] : VN[q][2 * h + 1];
          *reinterpret_cast<uint32_t*>(&sm.vT[(vw + g + 8 * h) * kLdP + 8 * nt + 2 * t]) =
              pack2(from_f<T>(x0), from_f<T>(x1));
        }
      }
      named_bar_arrive(kSoBarVnew, 256);

      // State update: S^T = exp(g_last) S^T + v~^T K over the chunk rows (k dim), this warp's keys (n).
      const float decay = __expf(glast);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) ST[nt][e] *= decay;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const int ra = 16 * ks + 2 * t, rb = ra + 8;
        const float sa0 = sm.scl[ra], sa1 = sm.scl[ra + 1], sb0 = sm.scl[rb], sb1 = sm.scl[rb + 1];
        uint32_t ah[4], al[4];
        split2<T>(VN[2 * ks][0] * sa0, VN[2 * ks][1] * sa1, &ah[0], &al[0]);
        split2<T>(VN[2 * ks][2] * sa0, VN[2 * ks][3] * sa1, &ah[1], &al[1]);
        split2<T>(VN[2 * ks + 1][0] * sb0, VN[2 * ks + 1][1] * sb1, &ah[2], &al[2]);
        split2<T>(VN[2 * ks + 1][2] * sb0, VN[2 * ks + 1][3] * sb1, &ah[3], &al[3]);
#pragma unroll
        for (int j2 = 0; j2 < 4; ++j2) {
          uint32_t bk[4];
          load_b_kn_x2(bk, sm.ks[b], kLdT, 16 * ks, k0 + 16 * j2, lane);
          mma16816<T>(ST[2 * j2], ah, bk);
          mma16816<T>(ST[2 * j2 + 1], ah, bk + 2);
          mma16816<T>(ST[2 * j2], al, bk);
          mma16816<T>(ST[2 * j2 + 1], al, bk + 2);
        }
      }
      publish_state(sm.sT[b ^ 1], ST, vw, k0, g, t);  // read at the next chunk, after its barrier
    } else {
      if (ci > 0) flush(ci - 1);
      // O_s^T = S^T Q^T for value rows vw .. + 15 and chunk rows 32 kh .. + 31, over all 128 keys.
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
          load_b_nk_x2(bq, sm.qs[b], kLdT, 16 * ks, 32 * kh + 16 * q2, lane);
          mma16816<T>(O[2 * q2], a, bq);
          mma16816<T>(O[2 * q2 + 1], a, bq + 2);
        }
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = 32 * kh + 8 * q + 2 * t;
        const float e0 = __expf(gc[row]), e1 = __expf(gc[row + 1]);
        O[q][0] *= e0;
        O[q][1] *= e1;
        O[q][2] *= e0;
        O[q][3] *= e1;
      }
      named_bar_sync(kSoBarVnew, 256);  // v_new^T is in sm.vT
      // + v_new^T P^T (P zero right of the diagonal): chunk rows 16 ks .. of v_new^T as the k dim.
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if (ks >= 2 * (kh + 1)) break;
        uint32_t a[4];
        load_a_row_lm(a, sm.vT, kLdP, vw, 16 * ks, lane);
#pragma unroll
        for (int q2 = 0; q2 < 2; ++q2) {
          uint32_t bp[4];
          load_b_nk_x2(bp, sm.ps[b], kLdP, 16 * ks, 32 * kh + 16 * q2, lane);
          mma16816<T>(O[2 * q2], a, bp);
          mma16816<T>(O[2 * q2 + 1], a, bp + 2);
        }
      }
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 32 * kh + 8 * q + 2 * t + (e & 1), v = vw + g + 8 * (e >> 1);
          sm.os[row * kLdS + v] = from_f<T>(p.scale * O[q][e]);
        }
    }
  }
  __syncthreads();
  if (nchunks > 0 && !state_warp) flush(nchunks - 1);
  if (p.fin.defined() && state_warp) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = k0 + 8 * nt + 2 * t + (e & 1), v = v0 + vw + g + 8 * (e >> 1);
        static_cast<float*>(p.fin.p)[n * p.fin.s0 + hv * p.fin.sh + k * p.fin.sk + v] = ST[nt][e];
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
