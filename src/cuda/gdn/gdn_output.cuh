// Stage 5, the chunk output, one CTA per (chunk, q/k head, half of V), four warps of 16 rows each;
// the CTA serves every value head of its q/k head's group (HV / H of them) in turn:
//   P = tril(Q K^T (.) Gamma_hv) (16-bit in smem), O_hv = scale (exp(g_hv) (.) (Q S_c,hv) + P V_new,hv).
// The stage is memory bound (L2 traffic first: with one CTA per value head, q and k went through
// L2 once per value head and per V half). Here Q K^T is computed once per CTA and kept in
// registers, only the gating differs per value head; each value head's V_new and h halves stream
// through two shared-memory buffers, the next one loading while the current one is used.
#pragma once

#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {

constexpr int kOutThreads = 128;
constexpr int kOutBV = 64;  // value columns per CTA
constexpr int kOutSplit = kHead / kOutBV;

template <typename T>
struct OutSmem {
  static constexpr int kLdT = kHead + 8, kLdV = kOutBV + 8, kLdP = kChunk + 8;
  struct PerHead {  // one value head's operands
    T vs[kChunk * kLdV];
    T hs[kHead * kLdV];
    float gc[kChunk];
  };
  T qs[kChunk * kLdT];
  T ks[kChunk * kLdT];
  PerHead head[2];
  T ps[kChunk * kLdP];  // P, then each warp's own output rows staged for 16-byte stores
};

template <typename T>
__global__ void __launch_bounds__(kOutThreads, 2) output_kernel(OutputParams p, SeqLayout L) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Smem = OutSmem<T>;
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  constexpr int kLdT = Smem::kLdT, kLdV = Smem::kLdV, kLdP = Smem::kLdP;
  const int hq = blockIdx.y, group = p.HV / p.H;
  const int64_t chunk = blockIdx.x / kOutSplit;
  const int v0 = static_cast<int>(blockIdx.x % kOutSplit) * kOutBV;
  ChunkPos c;
  if (!locate_chunk(L, chunk, &c)) return;
  if (chunk >= p.h.rows) return;  // h is shorter than the sequences say: nothing valid to read
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int len = c.len;

  // Value head i of the group into buffer i % 2, as one commit group (empty past the last head,
  // so that every step waits for the same count).
  auto load_head = [&](int i) {
    if (i < group) {
      const int hv = hq * group + i;
      typename Smem::PerHead& d = sm.head[i & 1];
      load_tile(d.vs, kLdV, p.v_new.p, p.v_new.dt,
                c.batch * p.v_new.sb + c.row0 * p.v_new.st + hv * p.v_new.sh + v0, p.v_new.st, len,
                kChunk, kOutBV);
      load_tile(d.hs, kLdV, p.h.p, p.h.dt, chunk * p.h.s0 + hv * p.h.sh + v0, p.h.sk, kHead, kHead,
                kOutBV);
      if (tid < kChunk)
        d.gc[tid] = tid < len ? ld_any(p.g_cum.p, 0, c.batch * p.g_cum.sb + (c.row0 + tid) * p.g_cum.st +
                                                         hv * p.g_cum.sh)
                              : 0.f;
    }
    cp_async_commit();
  };

  load_tile(sm.qs, kLdT, p.q.p, p.q.dt, c.batch * p.q.sb + c.row0 * p.q.st + hq * p.q.sh, p.q.st, len,
            kChunk, kHead);
  load_tile(sm.ks, kLdT, p.k.p, p.k.dt, c.batch * p.k.sb + c.row0 * p.k.st + hq * p.k.sh, p.k.st, len,
            kChunk, kHead);
  load_head(0);  // one commit group with q and k
  load_head(1);
  cp_async_wait<1>();
  __syncthreads();

  // Q K^T rows 16 * warp + g (+8), shared by every value head.
  float qk[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) qk[nt][0] = qk[nt][1] = qk[nt][2] = qk[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < kHead / 16; ++ks) {
    uint32_t a[4];
    load_a_row(a, sm.qs, kLdT, warp * 16, ks * 16, lane);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      uint32_t b[2];
      load_b_nk(b, sm.ks, kLdT, ks * 16, nt * 8, lane);
      mma16816<T>(qk[nt], a, b);
    }
  }

  const int r0 = warp * 16 + g, r1 = r0 + 8;
  const bool o_vec = p.o.dt == DtCode<T>::value && (reinterpret_cast<uintptr_t>(p.o.p) & 15) == 0 &&
                     p.o.sb % 8 == 0 && p.o.st % 8 == 0 && p.o.sh % 8 == 0;
  constexpr int kNT = kOutBV / 8;
  for (int i = 0; i < group; ++i) {
    if (i > 0) {
      cp_async_wait<1>();  // head i's group (all but the newest one)
      __syncthreads();
    }
    const typename Smem::PerHead& d = sm.head[i & 1];
    const int hv = hq * group + i;
    // P rows 16 * warp + g (+8): only this warp writes and reads them (the previous head's
    // output staging in them is done: the warp's own stores came first).
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = warp * 16 + g + (e >= 2 ? 8 : 0), j = nt * 8 + 2 * t + (e & 1);
        const float x = (j <= row && row < len) ? qk[nt][e] * __expf(d.gc[row] - d.gc[j]) : 0.f;
        sm.ps[row * kLdP + j] = from_f<T>(x);
      }
    __syncwarp();

    float o[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kHead / 16; ++ks) {
      uint32_t a[4];
      load_a_row(a, sm.qs, kLdT, warp * 16, ks * 16, lane);
#pragma unroll
      for (int nt = 0; nt < kNT; nt += 2) {
        uint32_t b[4];
        load_b_kn_x2(b, d.hs, kLdV, ks * 16, nt * 8, lane);
        mma16816<T>(o[nt], a, b);
        mma16816<T>(o[nt + 1], a, b + 2);
      }
    }
    const float e0 = __expf(d.gc[r0]), e1 = __expf(d.gc[r1]);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      o[nt][0] *= e0;
      o[nt][1] *= e0;
      o[nt][2] *= e1;
      o[nt][3] *= e1;
    }
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks) {
      uint32_t a[4];
      load_a_row(a, sm.ps, kLdP, warp * 16, ks * 16, lane);
#pragma unroll
      for (int nt = 0; nt < kNT; nt += 2) {
        uint32_t b[4];
        load_b_kn_x2(b, d.vs, kLdV, ks * 16, nt * 8, lane);
        mma16816<T>(o[nt], a, b);
        mma16816<T>(o[nt + 1], a, b + 2);
      }
    }

    const int64_t ob = c.batch * p.o.sb + c.row0 * p.o.st + hv * p.o.sh + v0;
    if (!o_vec) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int col = nt * 8 + 2 * t;
        if (r0 < len) st_pair(p.o.p, p.o.dt, ob + r0 * p.o.st + col, p.scale * o[nt][0], p.scale * o[nt][1]);
        if (r1 < len) st_pair(p.o.p, p.o.dt, ob + r1 * p.o.st + col, p.scale * o[nt][2], p.scale * o[nt][3]);
      }
    } else {
      // The warp's P rows are read (its PV products are done): they now hold its output rows,
      // which then leave as whole 16-byte pieces (8 per 64-column row) instead of 4-byte pairs.
      __syncwarp();
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int col = nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(&sm.ps[r0 * kLdP + col]) =
            pack2(from_f<T>(p.scale * o[nt][0]), from_f<T>(p.scale * o[nt][1]));
        *reinterpret_cast<uint32_t*>(&sm.ps[r1 * kLdP + col]) =
            pack2(from_f<T>(p.scale * o[nt][2]), from_f<T>(p.scale * o[nt][3]));
      }
      __syncwarp();
      T* const out = static_cast<T*>(p.o.p) + ob;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int r = warp * 16 + k * 4 + (lane >> 3), col = (lane & 7) * 8;
        if (r < len)
          *reinterpret_cast<uint4*>(out + r * p.o.st + col) = *reinterpret_cast<const uint4*>(&sm.ps[r * kLdP + col]);
      }
    }
    // Every thread is done with this head's buffer before it is refilled with head i + 2.
    __syncthreads();
    load_head(i + 2);
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the CTA exits
}

template <typename T>
Status launch_output_t(const OutputParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  const size_t smem = sizeof(OutSmem<T>);
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(output_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  dim3 grid(static_cast<unsigned>(max_chunks * kOutSplit), p.H);
  output_kernel<T><<<grid, kOutThreads, smem, s>>>(p, L);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn chunk output");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
