// Stage 5, the chunk output, as a streaming kernel: O = scale (exp(g) (.) (Q S_c) + P V_new) with
// P = tril(Q K^T (.) Gamma). The stage is memory bound: per (chunk, value head) it reads q, k,
// V_new, h and the gates and writes O, with ~2 us of tensor work against ~4 us of that SM's share
// of DRAM time. One CTA per SM walks (chunk, value head) items and keeps the next item's tiles
// loading (two stages) while it computes the current one, so the SM never waits on a whole item's
// latency (the per-head kernel in gdn_output.cuh loaded, computed and stored in turn, with a
// CTA's lifetime too short to hide its prologue). On sm_90 full chunks load by bulk copies (the
// TMA engine, one per tile row), elsewhere and for partial chunks by cp.async. The value heads of
// one q/k head are neighbouring items, so their second read of q and k hits L2.
// Eight warps: warp w takes rows 16 (w / 2) .. + 16 and value columns 64 (w % 2) .. + 64. Each
// computes its rows' Q K^T (only the n-tiles at or left of the diagonal) and keeps P in registers
// as the A operand of P V_new (the m16n8 accumulator layout is the m16k16 A layout), so P never
// goes through shared memory; warps of light and heavy row blocks share each SM sub-partition.
#pragma once

#include <atomic>

#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_bulk.cuh"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {

constexpr int kOsThreads = 256;

template <typename T>
struct OutStreamStage {
  static constexpr int kLd = kHead + 8;  // padded rows: ldmatrix reads without bank conflicts
  T qs[kChunk * kLd];
  T ks[kChunk * kLd];
  T vs[kChunk * kLd];
  T hs[kHead * kLd];
  float gc[kChunk];
};

// Item -> (chunk, value head); false when the item holds no rows (past the chunks, or h shorter
// than the sequences say). Uniform across the CTA.
__device__ __forceinline__ bool os_item(const OutputParams& p, const SeqLayout& L, int64_t item,
                                        int64_t items, ChunkPos* c, int64_t* chunk, int* hv) {
  if (item >= items) return false;
  *chunk = item / p.HV;
  *hv = static_cast<int>(item % p.HV);
  if (*chunk >= p.h.rows) return false;
  return locate_chunk(L, *chunk, c);
}

template <typename T>
struct OutStreamSmem {
  OutStreamStage<T> st[2];
  uint64_t bar[2];  // kBulk: each stage's bulk copies complete here, one phase per fill
};

// Starts an item's copies into one stage, as one cp.async commit group (empty for an item with no
// rows, so that every iteration waits on the same group count) and, with kBulk, one phase of the
// stage's mbarrier: a full chunk of 16-bit tiles moves as 320 bulk row copies (q, k, V_new: 64
// rows of 256 bytes; h: 128), issued by warp 0; a partial chunk (rows past its end must read as
// zeros) or converting loads go the cp.async way and the phase ends with no bytes.
template <typename T, bool kBulk>
__device__ __forceinline__ void os_load(const OutputParams& p, const SeqLayout& L, int64_t item,
                                        int64_t items, OutStreamStage<T>& d, uint64_t* bar) {
  constexpr int kLd = OutStreamStage<T>::kLd;
  ChunkPos c;
  int64_t chunk;
  int hv;
  const bool ok = os_item(p, L, item, items, &c, &chunk, &hv);
  constexpr int dt = DtCode<T>::value;
  const bool bulk = kBulk && ok && c.len == kChunk && p.q.dt == dt && p.k.dt == dt && p.v_new.dt == dt &&
                    p.h.dt == dt;
  if (kBulk) {
    if (bulk) {
      if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const int hq = hv / (p.HV / p.H);
        const T* q = static_cast<const T*>(p.q.p) + c.batch * p.q.sb + c.row0 * p.q.st + hq * p.q.sh;
        const T* k = static_cast<const T*>(p.k.p) + c.batch * p.k.sb + c.row0 * p.k.st + hq * p.k.sh;
        const T* v = static_cast<const T*>(p.v_new.p) + c.batch * p.v_new.sb + c.row0 * p.v_new.st + hv * p.v_new.sh;
        const T* h = static_cast<const T*>(p.h.p) + chunk * p.h.s0 + hv * p.h.sh;
        constexpr uint32_t kRow = kHead * sizeof(T);
        fence_proxy_async_smem();  // the stage's last reads (ldmatrix) came before the barrier
        if (lane == 0) mbar_arrive_expect(bar, (3 * kChunk + kHead) * kRow);
        __syncwarp();
        for (int r = lane; r < 3 * kChunk + kHead; r += 32) {
          if (r < kChunk) bulk_g2s(d.qs + r * kLd, q + r * p.q.st, kRow, bar);
          else if (r < 2 * kChunk) bulk_g2s(d.ks + (r - kChunk) * kLd, k + (r - kChunk) * p.k.st, kRow, bar);
          else if (r < 3 * kChunk) bulk_g2s(d.vs + (r - 2 * kChunk) * kLd, v + (r - 2 * kChunk) * p.v_new.st, kRow, bar);
          else bulk_g2s(d.hs + (r - 3 * kChunk) * kLd, h + (r - 3 * kChunk) * p.h.sk, kRow, bar);
        }
      }
    } else if (threadIdx.x == 0) {
      mbar_arrive_expect(bar, 0);
    }
  }
  if (ok && !bulk) {
    const int hq = hv / (p.HV / p.H), len = c.len;
    load_tile(d.qs, kLd, p.q.p, p.q.dt, c.batch * p.q.sb + c.row0 * p.q.st + hq * p.q.sh, p.q.st, len,
              kChunk, kHead);
    load_tile(d.ks, kLd, p.k.p, p.k.dt, c.batch * p.k.sb + c.row0 * p.k.st + hq * p.k.sh, p.k.st, len,
              kChunk, kHead);
    load_tile(d.vs, kLd, p.v_new.p, p.v_new.dt,
              c.batch * p.v_new.sb + c.row0 * p.v_new.st + hv * p.v_new.sh, p.v_new.st, len, kChunk, kHead);
    load_tile(d.hs, kLd, p.h.p, p.h.dt, chunk * p.h.s0 + hv * p.h.sh, p.h.sk, kHead, kHead, kHead);
  }
  if (ok) {
    const int len = c.len, r = threadIdx.x;
    if (r < kChunk) {  // g_cum is fp32; rows past the chunk's end read as 0
      const float* gp = static_cast<const float*>(p.g_cum.p);
      cp_async4(&d.gc[r], gp + (r < len ? c.batch * p.g_cum.sb + (c.row0 + r) * p.g_cum.st + hv * p.g_cum.sh : 0),
                r < len);
    }
  }
  cp_async_commit();
}

template <typename T>
__device__ __forceinline__ void os_compute(const OutputParams& p, const SeqLayout& L, int64_t item,
                                           int64_t items, const OutStreamStage<T>& d) {
  constexpr int kLd = OutStreamStage<T>::kLd;
  ChunkPos c;
  int64_t chunk;
  int hv;
  if (!os_item(p, L, item, items, &c, &chunk, &hv)) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int rw = warp >> 1, c0 = (warp & 1) * 64;  // row block, first value column
  const int r0 = rw * 16 + g, r1 = r0 + 8, len = c.len;

  uint32_t qa[8][4];  // Q rows of this warp, all of K: the A operand of both Q K^T and Q S
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) load_a_row_lm(qa[ks], d.qs, kLd, rw * 16, ks * 16, lane);

  // Q K^T, n-tiles 0 .. 2 rw + 1 (the rest lie right of the diagonal).
  float s[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int np = 0; np < 4; ++np)
      if (np <= rw) {
        uint32_t b[4];
        load_b_nk_x2(b, d.ks, kLd, ks * 16, np * 16, lane);
        mma16816<T>(s[2 * np], qa[ks], b);
        mma16816<T>(s[2 * np + 1], qa[ks], b + 2);
      }

  // P = tril(Q K^T (.) exp(g_r - g_j)) in 16 bits, straight into A fragments (k-block kk = columns
  // 16 kk .. + 16 = n-tiles 2 kk, 2 kk + 1).
  const float g0 = d.gc[r0], g1 = d.gc[r1];
  uint32_t pa[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    if (kk <= rw) {
      float x[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = e < 2 ? r0 : r1, j = (2 * kk + h) * 8 + 2 * t + (e & 1);
          x[h][e] = (j <= row && row < len) ? s[2 * kk + h][e] * __expf((e < 2 ? g0 : g1) - d.gc[j]) : 0.f;
        }
      pa[kk][0] = pack2(from_f<T>(x[0][0]), from_f<T>(x[0][1]));
      pa[kk][1] = pack2(from_f<T>(x[0][2]), from_f<T>(x[0][3]));
      pa[kk][2] = pack2(from_f<T>(x[1][0]), from_f<T>(x[1][1]));
      pa[kk][3] = pack2(from_f<T>(x[1][2]), from_f<T>(x[1][3]));
    }

  float o[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      load_b_kn_x2(b, d.hs, kLd, ks * 16, c0 + np * 16, lane);
      mma16816<T>(o[2 * np], qa[ks], b);
      mma16816<T>(o[2 * np + 1], qa[ks], b + 2);
    }
  const float e0 = __expf(g0), e1 = __expf(g1);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    o[nt][0] *= e0;
    o[nt][1] *= e0;
    o[nt][2] *= e1;
    o[nt][3] *= e1;
  }
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    if (kk <= rw) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4];
        load_b_kn_x2(b, d.vs, kLd, kk * 16, c0 + np * 16, lane);
        mma16816<T>(o[2 * np], pa[kk], b);
        mma16816<T>(o[2 * np + 1], pa[kk], b + 2);
      }
    }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nt][e] *= p.scale;

  const int64_t ob = c.batch * p.o.sb + c.row0 * p.o.st + hv * p.o.sh + c0;
  if (tok_vec16<T>(p.o)) {
    T* const out = static_cast<T*>(p.o.p) + ob;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      store_acc_rows16<T>(out + r0 * p.o.st + 32 * hf, out + r1 * p.o.st + 32 * hf, &o[4 * hf], r0 < len,
                          r1 < len, t);
  } else {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int col = nt * 8 + 2 * t;
      if (r0 < len) st_pair(p.o.p, p.o.dt, ob + r0 * p.o.st + col, o[nt][0], o[nt][1]);
      if (r1 < len) st_pair(p.o.p, p.o.dt, ob + r1 * p.o.st + col, o[nt][2], o[nt][3]);
    }
  }
}

template <typename T, bool kBulk>
__global__ void __launch_bounds__(kOsThreads, 1) output_stream_kernel(OutputParams p, SeqLayout L, int64_t items) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  OutStreamSmem<T>& sm = *reinterpret_cast<OutStreamSmem<T>*>(smem_raw);
  OutStreamStage<T>* st = sm.st;
  if (kBulk) {
    if (threadIdx.x == 0) {
      mbar_init(&sm.bar[0]);
      mbar_init(&sm.bar[1]);
    }
    __syncthreads();
  }
  int64_t item = blockIdx.x;
  os_load<T, kBulk>(p, L, item, items, st[0], &sm.bar[0]);
  for (int s = 0, k = 0; item < items; item += gridDim.x, s ^= 1, ++k) {
    // The other stage was released by the barrier that ended the previous iteration.
    os_load<T, kBulk>(p, L, item + gridDim.x, items, st[s ^ 1], &sm.bar[s ^ 1]);
    cp_async_wait<1>();  // this item's group (all but the newest)
    if (kBulk) mbar_wait(&sm.bar[s], (k >> 1) & 1);  // the stage's (k / 2)-th fill
    __syncthreads();
    os_compute(p, L, item, items, st[s]);
    __syncthreads();  // every warp is done with stage s before it is refilled
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the CTA exits
}

// bulk: the bulk-copy loads (sm_90 devices only; the caller checks).
template <typename T>
Status launch_output_stream_t(const OutputParams& p, const SeqLayout& L, int64_t max_chunks, bool bulk,
                              cudaStream_t s) {
  const int64_t items = max_chunks * p.HV;
  if (items <= 0) return Status::Ok();
  const int smem = static_cast<int>(sizeof(OutStreamSmem<T>));
  auto* kernel = bulk ? output_stream_kernel<T, true> : output_stream_kernel<T, false>;
  // Per device, cached (host time on every call otherwise): the SM count, once both kernels may
  // take their shared memory.
  static std::atomic<int> sm_count[64] = {};
  int dev = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&dev));
  int sms = dev < 64 ? sm_count[dev].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    for (auto* k : {output_stream_kernel<T, false>, output_stream_kernel<T, true>})
      ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (dev < 64) sm_count[dev].store(sms, std::memory_order_relaxed);
  }
  // At most one CTA per SM, and as few as give each CTA the same number of items (the last one
  // perhaps fewer): no round where only some SMs still work.
  const int64_t rounds = (items + sms - 1) / sms;
  const int64_t grid = (items + rounds - 1) / rounds;
  kernel<<<static_cast<unsigned>(grid), kOsThreads, smem, s>>>(p, L, items);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn chunk output (streaming)");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
