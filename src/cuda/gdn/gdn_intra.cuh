// Stages 1-3 of the chunked forward fused per (chunk, value head): gate cumsum, A = strict_lower(
// diag(beta)(K K^T (.) Gamma)), T = (I + A)^-1 in fp32, then W = T diag(beta exp(g)) K and
// U = T diag(beta) V. K K^T and the W/U products run on tensor cores; the W/U products split the
// fp32 T into hi + lo 16-bit halves so T keeps ~fp32 accuracy.
#pragma once

#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {

constexpr int kIntraThreads = 128;
constexpr int kLdT = kHead + 8;    // 16-bit tile rows, padded against bank conflicts
constexpr int kLdA = kChunk + 1;   // fp32 64 x 64
constexpr int kLdP = kChunk + 8;   // 16-bit 64 x 64

template <typename T>
struct IntraSmem {
  T ks[kChunk * kLdT];
  T vs[kChunk * kLdT];
  float am[kChunk * kLdA];
  T thi[kChunk * kLdP];
  T tlo[kChunk * kLdP];
  float gc[kChunk];
  float bt[kChunk];
};

// out = Tmat(64x64, hi/lo in smem) * X (64 x 128 in smem), written to rows < len of `dst`.
template <typename T>
__device__ __forceinline__ void intra_product(const IntraSmem<T>& sm, const T* x, const Tok& dst,
                                              int64_t base, int len) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  float acc[16][4];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < kChunk / 16; ++ks) {
    uint32_t ahi[4], alo[4];
    load_a_row(ahi, sm.thi, kLdP, warp * 16, ks * 16, lane);
    load_a_row(alo, sm.tlo, kLdP, warp * 16, ks * 16, lane);
#pragma unroll
    for (int nt = 0; nt < 16; nt += 2) {
      uint32_t b[4];
      load_b_kn_x2(b, x, kLdT, ks * 16, nt * 8, lane);
      mma16816<T>(acc[nt], ahi, b);
      mma16816<T>(acc[nt], alo, b);
      mma16816<T>(acc[nt + 1], ahi, b + 2);
      mma16816<T>(acc[nt + 1], alo, b + 2);
    }
  }
  const int r0 = warp * 16 + g, r1 = r0 + 8;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    const int c = nt * 8 + 2 * t;
    if (r0 < len) st_pair(dst.p, dst.dt, base + r0 * dst.st + c, acc[nt][0], acc[nt][1]);
    if (r1 < len) st_pair(dst.p, dst.dt, base + r1 * dst.st + c, acc[nt][2], acc[nt][3]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kIntraThreads) intra_kernel(IntraParams p, SeqLayout L) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  IntraSmem<T>& sm = *reinterpret_cast<IntraSmem<T>*>(smem_raw);
  const int hv = blockIdx.y;
  ChunkPos c;
  if (!locate_chunk(L, blockIdx.x, &c)) return;
  const int hq = hv / (p.HV / p.H);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int len = c.len;

  // Gates: warp 0 scans two tokens per lane; rows past len repeat the last cumsum so every
  // exponent stays finite (their K, V and beta are zero).
  if (warp == 0) {
    const int64_t gb = c.batch * p.g.sb + c.row0 * p.g.st + hv * p.g.sh;
    const int i0 = 2 * lane, i1 = i0 + 1;
    const float a = i0 < len ? ld_any(p.g.p, 0, gb + i0 * p.g.st) : 0.f;
    const float b = i1 < len ? ld_any(p.g.p, 0, gb + i1 * p.g.st) : 0.f;
    float x0 = a, x1 = b;
    if (!p.g_is_cum) {
      float s = a + b;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += y;
      }
      x0 = s - b;
      x1 = s;
    }
    const int last = len - 1;
    const float lastv = __shfl_sync(0xffffffffu, (last & 1) ? x1 : x0, last >> 1);
    sm.gc[i0] = i0 < len ? x0 : lastv;
    sm.gc[i1] = i1 < len ? x1 : lastv;
    if (p.g_cum_out.defined()) {
      const Tok& o = p.g_cum_out;
      const int64_t ob = c.batch * o.sb + c.row0 * o.st + hv * o.sh;
      if (i0 < len) st_any(o.p, 0, ob + i0 * o.st, x0);
      if (i1 < len) st_any(o.p, 0, ob + i1 * o.st, x1);
    }
  } else if (warp == 1 || warp == 2) {
    const int i = tid - 32;
    sm.bt[i] = i < len ? ld_any(p.beta.p, p.beta.dt, c.batch * p.beta.sb + (c.row0 + i) * p.beta.st +
                                                      hv * p.beta.sh)
                       : 0.f;
  }
  const bool need_wu = p.w.defined() || p.u.defined();
  const bool need_a = p.a_inv_out.defined() || need_wu;
  if (!need_a) return;  // cumsum only (whole block leaves together: no barrier follows)
  load_tile(sm.ks, kLdT, p.k.p, p.k.dt, c.batch * p.k.sb + c.row0 * p.k.st + hq * p.k.sh, p.k.st,
            len, kChunk, kHead);
  if (p.u.defined())
    load_tile(sm.vs, kLdT, p.v.p, p.v.dt, c.batch * p.v.sb + c.row0 * p.v.st + hv * p.v.sh, p.v.st,
              len, kChunk, kHead);
  cp_async_wait_all();
  __syncthreads();

  const int g = lane >> 2, t = lane & 3;
  if (p.a_inv_in.defined()) {
    const Tok& a = p.a_inv_in;
    const int64_t ab = c.batch * a.sb + c.row0 * a.st + hv * a.sh;
    for (int i = tid; i < kChunk * kChunk; i += kIntraThreads) {
      const int r = i / kChunk, j = i % kChunk;
      sm.am[r * kLdA + j] = (r < len && j < len) ? ld_any(a.p, a.dt, ab + r * a.st + j) : (r == j ? 1.f : 0.f);
    }
    __syncthreads();
  } else {
    float acc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kHead / 16; ++ks) {
      uint32_t a[4];
      load_a_row(a, sm.ks, kLdT, warp * 16, ks * 16, lane);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        uint32_t b[2];
        load_b_nk(b, sm.ks, kLdT, ks * 16, nt * 8, lane);
        mma16816<T>(acc[nt], a, b);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = warp * 16 + g + (e >= 2 ? 8 : 0), j = nt * 8 + 2 * t + (e & 1);
        sm.am[i * kLdA + j] = i > j ? sm.bt[i] * acc[nt][e] * __expf(sm.gc[i] - sm.gc[j]) : 0.f;
      }
    }
    __syncthreads();
    // (I + A)^-1 by forward substitution, one column per thread, the column in registers.
    float x[kChunk];
    if (tid < kChunk) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        // Four partial sums: the dependent FMA chain is a quarter as long.
        float s4[4] = {(i == tid) ? 1.f : 0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < i; ++j) s4[j & 3] -= sm.am[i * kLdA + j] * x[j];
        x[i] = (s4[0] + s4[1]) + (s4[2] + s4[3]);
      }
    }
    __syncthreads();
    if (tid < kChunk) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) sm.am[i * kLdA + tid] = x[i];
    }
    __syncthreads();
    if (p.a_inv_out.defined()) {
      const Tok& a = p.a_inv_out;
      const int64_t ab = c.batch * a.sb + c.row0 * a.st + hv * a.sh;
      for (int i = tid; i < len * kChunk; i += kIntraThreads) {
        const int r = i / kChunk, j = i % kChunk;
        st_any(a.p, a.dt, ab + r * a.st + j, sm.am[r * kLdA + j]);
      }
    }
  }
  if (p.w.defined()) {
    for (int i = tid; i < kChunk * kChunk; i += kIntraThreads) {
      const int r = i / kChunk, j = i % kChunk;
      split_hi_lo(sm.am[r * kLdA + j] * sm.bt[j] * __expf(sm.gc[j]), &sm.thi[r * kLdP + j],
                  &sm.tlo[r * kLdP + j]);
    }
    __syncthreads();
    intra_product(sm, sm.ks, p.w, c.batch * p.w.sb + c.row0 * p.w.st + hv * p.w.sh, len);
    __syncthreads();
  }
  if (p.u.defined()) {
    for (int i = tid; i < kChunk * kChunk; i += kIntraThreads) {
      const int r = i / kChunk, j = i % kChunk;
      split_hi_lo(sm.am[r * kLdA + j] * sm.bt[j], &sm.thi[r * kLdP + j], &sm.tlo[r * kLdP + j]);
    }
    __syncthreads();
    intra_product(sm, sm.vs, p.u, c.batch * p.u.sb + c.row0 * p.u.st + hv * p.u.sh, len);
  }
}

template <typename T>
Status launch_intra_t(const IntraParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  const size_t smem = sizeof(IntraSmem<T>);
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(intra_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  dim3 grid(static_cast<unsigned>(max_chunks), p.HV);
  intra_kernel<T><<<grid, kIntraThreads, smem, s>>>(p, L);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn intra");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
