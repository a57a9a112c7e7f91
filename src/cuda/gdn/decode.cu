// Gated DeltaNet decode step: one token per sequence against a pool of fp32 states, updated in
// place. Memory-bound: the state is streamed once (read + write) in 16-byte accesses. Work items
// are 128 x 64 column slices of one (sequence, value head)
// state; a persistent grid walks them and prefetches the next item (slot index, state slice,
// q/k/v/g/beta) into registers while it finishes the current one, so neither the index load nor
// the state load sits on the critical path.
// Using S_old only, both reductions happen in one pass:
//   kv = exp(g) S^T k,  sq = S^T q,  v' = beta (v - kv),  o = scale (exp(g) sq + (q.k) v'),
//   S <- exp(g) S + k v'^T.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

// State accesses, plain or streaming (evict-first: ld/st.global.cs).
template <bool kStream>
__device__ __forceinline__ float4 ld_state(const float* a) {
  if constexpr (kStream) return __ldcs(reinterpret_cast<const float4*>(a));
  else return *reinterpret_cast<const float4*>(a);
}
template <bool kStream>
__device__ __forceinline__ void st_state(float* a, float4 v) {
  if constexpr (kStream) __stcs(reinterpret_cast<float4*>(a), v);
  else *reinterpret_cast<float4*>(a) = v;
}

constexpr int kThreads = 256;  // BV / 4 column groups (float4) x the rest row groups

// kBV state columns per item (32 or 64).
template <int kBV>
struct Cfg {
  static constexpr int kSlices = kHead / kBV;
  static constexpr int kColGroups = kBV / 4;
  static constexpr int kRowGroups = kThreads / kColGroups;
  static constexpr int kRowsPerThread = kHead / kRowGroups;
};

template <int kBV>
struct Item {
  static constexpr int kRowsPerThread = Cfg<kBV>::kRowsPerThread;
  int n, hv, vb;
  int32_t slot;
  bool valid;       // slot inside the pool
  float4 s[kRowsPerThread];
  float q, k;       // threads < 128: element tid of q / k
  float v, g, beta; // threads < 32: column tid of v; g and beta of the head
};

// The pool slot of an item's sequence; loaded one item ahead of fetch() so that the state loads,
// which need it, never wait for it.
template <int kBV>
__device__ __forceinline__ int32_t item_slot(const DecodeParams& p, int item, int items) {
  if (item >= items) return -1;
  return p.indices[static_cast<int64_t>(item / (Cfg<kBV>::kSlices * p.HV)) * p.idx_stride];
}

// kHint: bit 0 streaming state loads, bit 1 streaming state stores.
template <int kBV, int kHint>
__device__ __forceinline__ void fetch(const DecodeParams& p, int item, int32_t slot, Item<kBV>* it) {
  using C = Cfg<kBV>;
  constexpr int kSlices = C::kSlices, kRowsPerThread = C::kRowsPerThread;
  const int tid = threadIdx.x, cg = tid % C::kColGroups, rg = tid / C::kColGroups;
  it->vb = item % kSlices;
  it->hv = (item / kSlices) % p.HV;
  it->n = item / (kSlices * p.HV);
  const int n = it->n, hv = it->hv, hq = hv / (p.HV / p.H);
  it->slot = slot;
  // Device-side index: an out-of-range slot (negative is the usual "padding" marker) means this
  // sequence has no state; it is skipped (no state touched) and its output row is zero.
  it->valid = it->slot >= 0 && it->slot < p.pool.rows;
  if (it->valid) {
    const float* S = static_cast<const float*>(p.pool.p) + it->slot * p.pool.s0 + hv * p.pool.sh +
                     it->vb * kBV + cg * 4;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
      it->s[i] = ld_state<(kHint & 1) != 0>(S + (rg + C::kRowGroups * i) * p.pool.sk);
  }
  if (tid < kHead) {
    it->q = ld_any(p.q.p, p.q.dt, n * p.q.sb + hq * p.q.sh + tid);
    it->k = ld_any(p.k.p, p.k.dt, n * p.k.sb + hq * p.k.sh + tid);
  }
  if (tid < kBV) {
    it->v = ld_any(p.v.p, p.v.dt, n * p.v.sb + hv * p.v.sh + it->vb * kBV + tid);
    it->g = ld_any(p.g.p, 0, n * p.g.sb + hv * p.g.sh);
    it->beta = ld_any(p.beta.p, p.beta.dt, n * p.beta.sb + hv * p.beta.sh);
  }
}

template <int kBV, int kHint>
__global__ void __launch_bounds__(kThreads, kBV == 32 ? 4 : (kBV == 64 ? 2 : 1)) decode_kernel(DecodeParams p, int items) {
  using C = Cfg<kBV>;
  constexpr int kRowsPerThread = C::kRowsPerThread;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cg = tid % C::kColGroups, rg = tid / C::kColGroups;
  __shared__ float sq_[kHead], sk_[kHead];
  __shared__ float red[kThreads / 32][2][kBV];
  __shared__ float vdelta[kBV];
  __shared__ float dots[3][4];

  int item = blockIdx.x;
  if (item >= items) return;
  Item<kBV> cur, nxt;
  int32_t next_slot = item_slot<kBV>(p, item + gridDim.x, items);
  fetch<kBV, kHint>(p, item, item_slot<kBV>(p, item, items), &cur);
  while (true) {
    const int next = item + gridDim.x;
    const int32_t after_slot = item_slot<kBV>(p, next + gridDim.x, items);
    if (next < items) fetch<kBV, kHint>(p, next, next_slot, &nxt);
    next_slot = after_slot;
    const int64_t o_off = cur.n * p.o.sb + cur.hv * p.o.sh + cur.vb * kBV;
    if (!cur.valid) {  // uniform across the block
      if (tid < kBV) st_any(p.o.p, p.o.dt, o_off + tid, 0.f);
    } else {
      __syncthreads();  // the previous item's readers of the shared arrays are done
      if (tid < kHead) {
        sq_[tid] = cur.q;
        sk_[tid] = cur.k;
        float a = cur.q * cur.q, b = cur.k * cur.k, c = cur.q * cur.k;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          a += __shfl_xor_sync(0xffffffffu, a, o);
          b += __shfl_xor_sync(0xffffffffu, b, o);
          c += __shfl_xor_sync(0xffffffffu, c, o);
        }
        if (lane == 0) {
          dots[0][warp] = a;
          dots[1][warp] = b;
          dots[2][warp] = c;
        }
      }
      __syncthreads();
      float qscale = 1.f, kscale = 1.f;
      if (p.l2norm) {
        qscale = rsqrtf(dots[0][0] + dots[0][1] + dots[0][2] + dots[0][3] + 1e-6f);
        kscale = rsqrtf(dots[1][0] + dots[1][1] + dots[1][2] + dots[1][3] + 1e-6f);
      }
      const float qk = (dots[2][0] + dots[2][1] + dots[2][2] + dots[2][3]) * qscale * kscale;

      float pk[4] = {0, 0, 0, 0}, pq[4] = {0, 0, 0, 0};
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = rg + C::kRowGroups * i;
        const float kr = sk_[r], qr = sq_[r];
        const float v[4] = {cur.s[i].x, cur.s[i].y, cur.s[i].z, cur.s[i].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          pk[j] += v[j] * kr;
          pq[j] += v[j] * qr;
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int o = C::kColGroups; o < 32; o <<= 1) {
          pk[j] += __shfl_xor_sync(0xffffffffu, pk[j], o);
          pq[j] += __shfl_xor_sync(0xffffffffu, pq[j], o);
        }
      }
      if (lane < C::kColGroups) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          red[warp][0][cg * 4 + j] = pk[j];
          red[warp][1][cg * 4 + j] = pq[j];
        }
      }
      __syncthreads();
      if (tid < kBV) {
        const float decay = __expf(cur.g);
        float kv = 0.f, sq = 0.f;
#pragma unroll
        for (int w = 0; w < kThreads / 32; ++w) {
          kv += red[w][0][tid];
          sq += red[w][1][tid];
        }
        kv *= kscale * decay;
        sq *= qscale;
        const float vd = cur.beta * (cur.v - kv);
        vdelta[tid] = vd;
        dots[0][0] = decay;  // read after the barrier below, by which all dots reads are done
        st_any(p.o.p, p.o.dt, o_off + tid, p.scale * (decay * sq + qk * vd));
      }
      __syncthreads();
      const float decay = dots[0][0];
      const float4 vd = *reinterpret_cast<const float4*>(&vdelta[cg * 4]);
      float* S = static_cast<float*>(p.pool.p) + cur.slot * p.pool.s0 + cur.hv * p.pool.sh +
                 cur.vb * kBV + cg * 4;
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = rg + C::kRowGroups * i;
        const float kr = sk_[r] * kscale;
        float4 x = cur.s[i];
        x.x = decay * x.x + kr * vd.x;
        x.y = decay * x.y + kr * vd.y;
        x.z = decay * x.z + kr * vd.z;
        x.w = decay * x.w + kr * vd.w;
        st_state<(kHint & 2) != 0>(S + r * p.pool.sk, x);
      }
    }
    if (next >= items) break;
    cur = nxt;
    item = next;
  }
}

template <int kBV, int kHint>
Status launch_decode_bv(const DecodeParams& p, cudaStream_t s) {
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * Cfg<kBV>::kSlices;
  if (items > (int64_t(1) << 30)) return Status::Unsupported("gdn_decode_step: too many sequences x heads");
  // Grid fill per device, cached: the queries cost host time on every decode step otherwise.
  static std::atomic<int> fill[64] = {};
  int dev = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&dev));
  int ctas = dev < 64 ? fill[dev].load(std::memory_order_relaxed) : 0;
  if (ctas == 0) {
    int sms = 0, per_sm = 0;
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ATTNKIT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_kernel<kBV, kHint>, kThreads, 0));
    ctas = sms * (per_sm < 1 ? 1 : per_sm);
    if (dev < 64) fill[dev].store(ctas, std::memory_order_relaxed);
  }
  const int64_t sms = ctas, per_sm = 1;
  const int64_t grid = std::min<int64_t>(items, static_cast<int64_t>(sms) * per_sm);
  decode_kernel<kBV, kHint><<<static_cast<unsigned>(grid), kThreads, 0, s>>>(p, static_cast<int>(items));
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn decode");
  return Status::Ok();
}

// ---- Warp items: the 16 state columns 16 vs .. 16 vs + 15 of one (sequence, value head), 8 KB,
// one warp each, no block barriers. Lane = 4 x row group + column group: rows 16 rg .. 16 rg + 15,
// columns 16 vs + 4 cg .. + 3 (one float4 per row, 16 in flight per lane); both reductions over
// the rows are 3 shuffle steps across the row groups. A CTA's 8 warps take the 8 slices of one
// state, so its 512-byte rows are read and written at about the same time. q, k (the lane's 16
// rows) and v (its 4 columns) come as vectors where aligned (vec), else element by element.
constexpr int kWCols = 16, kWSlices = kHead / kWCols, kWRows = kHead / 8, kWThreads = 256;


// n consecutive elements (n a multiple of 4) of a T tensor at element offset i to fp32: 16-byte
// vector loads when vec (the caller checked alignment), else element by element.
template <typename T, int n>
__device__ __forceinline__ void ld_run(const void* base, int64_t i, bool vec, float (&out)[n]) {
  const T* a = static_cast<const T*>(base) + i;
  if (vec) {
    constexpr int kPer = 16 / sizeof(T);  // elements per 16 bytes
    if constexpr (n * sizeof(T) >= 16) {
#pragma unroll
      for (int c = 0; c < n; c += kPer) {
        const uint4 x = *reinterpret_cast<const uint4*>(a + c);
        const T* e = reinterpret_cast<const T*>(&x);
#pragma unroll
        for (int j = 0; j < kPer; ++j) out[c + j] = static_cast<float>(e[j]);
      }
    } else {  // 4 16-bit elements: one 8-byte load
      const uint2 x = *reinterpret_cast<const uint2*>(a);
      const T* e = reinterpret_cast<const T*>(&x);
#pragma unroll
      for (int j = 0; j < n; ++j) out[j] = static_cast<float>(e[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < n; ++j) out[j] = static_cast<float>(a[j]);
  }
}

struct WPos {
  int n, hv, vs;
};
__device__ __forceinline__ WPos wpos(const DecodeParams& p, int item) {
  return {item / (kWSlices * p.HV), (item / kWSlices) % p.HV, item % kWSlices};
}
__device__ __forceinline__ int32_t wslot(const DecodeParams& p, int item, int items) {
  if (item >= items) return -1;
  return p.indices[static_cast<int64_t>(item / (kWSlices * p.HV)) * p.idx_stride];
}
__device__ __forceinline__ bool wvalid(const DecodeParams& p, int32_t slot) { return slot >= 0 && slot < p.pool.rows; }
__device__ __forceinline__ float* wstate(const DecodeParams& p, WPos w, int32_t slot) {
  const int lane = threadIdx.x & 31;
  return static_cast<float*>(p.pool.p) + slot * p.pool.s0 + w.hv * p.pool.sh + 16 * (lane >> 2) * p.pool.sk +
         w.vs * kWCols + 4 * (lane & 3);
}
template <bool kStream>
__device__ __forceinline__ void wload(const DecodeParams& p, WPos w, int32_t slot, float4 (&s)[kWRows]) {
  if (!wvalid(p, slot)) return;
  const float* S = wstate(p, w, slot);
#pragma unroll
  for (int i = 0; i < kWRows; ++i) s[i] = ld_state<kStream>(S + i * p.pool.sk);
}

// One warp item with its state slice in s (loaded, or garbage for an invalid slot).
template <typename T, bool kStream>
__device__ __forceinline__ void wprocess(const DecodeParams& p, bool vec, WPos w, int32_t slot, float4 (&s)[kWRows]) {
  const int lane = threadIdx.x & 31, cg = lane & 3, rg = lane >> 2;
  const int c0 = w.vs * kWCols + 4 * cg;
  const int64_t o_off = w.n * p.o.sb + w.hv * p.o.sh + c0;
  if (!wvalid(p, slot)) {  // uniform across the warp: no state, a zero output row
    if (rg == 0) {
      st_pair(p.o.p, p.o.dt, o_off, 0.f, 0.f);
      st_pair(p.o.p, p.o.dt, o_off + 2, 0.f, 0.f);
    }
    return;
  }
  const int hq = w.hv / (p.HV / p.H);
  float q[kWRows], k[kWRows], v[4];
  ld_run<T>(p.q.p, w.n * p.q.sb + hq * p.q.sh + 16 * rg, vec, q);
  ld_run<T>(p.k.p, w.n * p.k.sb + hq * p.k.sh + 16 * rg, vec, k);
  ld_run<T>(p.v.p, w.n * p.v.sb + w.hv * p.v.sh + c0, vec, v);
  const float g = ld_any(p.g.p, 0, w.n * p.g.sb + w.hv * p.g.sh);
  const float beta = ld_any(p.beta.p, p.beta.dt, w.n * p.beta.sb + w.hv * p.beta.sh);
  float qq = 0.f, kk = 0.f, qk = 0.f, pq[4] = {0.f, 0.f, 0.f, 0.f}, pk[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < kWRows; ++i) {
    qq += q[i] * q[i];
    kk += k[i] * k[i];
    qk += q[i] * k[i];
    pq[0] += s[i].x * q[i], pq[1] += s[i].y * q[i], pq[2] += s[i].z * q[i], pq[3] += s[i].w * q[i];
    pk[0] += s[i].x * k[i], pk[1] += s[i].y * k[i], pk[2] += s[i].z * k[i], pk[3] += s[i].w * k[i];
  }
  // Sums over the 8 row groups (lanes 4 apart). The 4 lanes of a row group hold the same q, k
  // rows, so each lane's q.q, k.k, q.k sum ends with the dot products over all 128 rows.
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    qq += __shfl_xor_sync(0xffffffffu, qq, o);
    kk += __shfl_xor_sync(0xffffffffu, kk, o);
    qk += __shfl_xor_sync(0xffffffffu, qk, o);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      pq[j] += __shfl_xor_sync(0xffffffffu, pq[j], o);
      pk[j] += __shfl_xor_sync(0xffffffffu, pk[j], o);
    }
  }
  float qscale = 1.f, kscale = 1.f;
  if (p.l2norm) {
    qscale = rsqrtf(qq + 1e-6f);
    kscale = rsqrtf(kk + 1e-6f);
  }
  const float qkn = qk * qscale * kscale, decay = __expf(g);
  float vd[4], out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    vd[j] = beta * (v[j] - pk[j] * kscale * decay);
    out[j] = p.scale * (decay * pq[j] * qscale + qkn * vd[j]);
  }
  if (rg == 0) {
    st_pair(p.o.p, p.o.dt, o_off, out[0], out[1]);
    st_pair(p.o.p, p.o.dt, o_off + 2, out[2], out[3]);
  }
  float* S = wstate(p, w, slot);
#pragma unroll
  for (int i = 0; i < kWRows; ++i) {
    const float kr = k[i] * kscale;
    float4 x = s[i];
    x.x = decay * x.x + kr * vd[0];
    x.y = decay * x.y + kr * vd[1];
    x.z = decay * x.z + kr * vd[2];
    x.w = decay * x.w + kr * vd[3];
    st_state<kStream>(S + i * p.pool.sk, x);
  }
}

// One item per warp; the block scheduler balances the tail.
template <typename T, bool kStream>
__global__ void __launch_bounds__(kWThreads, 2) decode_warp_kernel(DecodeParams p, int items, bool vec) {
  const int item = blockIdx.x * (kWThreads / 32) + threadIdx.x / 32;
  if (item >= items) return;
  const WPos w = wpos(p, item);
  const int32_t slot = wslot(p, item, items);
  float4 s[kWRows];
  wload<kStream>(p, w, slot, s);
  wprocess<T, kStream>(p, vec, w, slot, s);
}

// Whether q, k (16-element runs from multiples of 16) and v (4-element runs from multiples of 4)
// of a T tensor can be read as 16- / 8-byte vectors.
template <typename T>
bool runs_aligned(const Tok& t) {
  const int64_t e = 16 / static_cast<int64_t>(sizeof(T));  // elements per 16 bytes
  return (reinterpret_cast<uintptr_t>(t.p) & 15) == 0 && t.sb % e == 0 && t.sh % e == 0;
}

template <typename T, bool kStream>
Status launch_decode_warp(const DecodeParams& p, cudaStream_t s) {
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * kWSlices;
  if (items > (int64_t(1) << 30)) return Status::Unsupported("gdn_decode_step: too many sequences x heads");
  const bool vec = runs_aligned<T>(p.q) && runs_aligned<T>(p.k) && runs_aligned<T>(p.v);
  const int64_t grid = (items + kWThreads / 32 - 1) / (kWThreads / 32);
  decode_warp_kernel<T, kStream><<<static_cast<unsigned>(grid), kWThreads, 0, s>>>(p, static_cast<int>(items), vec);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn decode (warp items)");
  return Status::Ok();
}

template <bool kStream>
Status launch_decode_warp_dt(const DecodeParams& p, cudaStream_t s) {
  if (p.q.dt == 2) return launch_decode_warp<__nv_bfloat16, kStream>(p, s);
  if (p.q.dt == 1) return launch_decode_warp<__half, kStream>(p, s);
  return launch_decode_warp<float, kStream>(p, s);
}

}  // namespace

// ATTNKIT_GDN_DECODE (temporary, for side-by-side timings): slice64 (the CTA-item kernel; _cs
// streaming state loads and stores, _csld loads only, _csst stores only), row128_cs (whole-state
// items: each warp reads 512-byte rows), warp_cs (warp items, streaming; the default). Measured on
// an H100 (gdnout helper, call 1): warp items without streaming hints and a persistent prefetching
// warp kernel were slower at b1, b32 and b256 and are gone.
Status launch_decode(const DecodeParams& p, cudaStream_t s) {
  if (p.N == 0 || p.HV == 0) return Status::Ok();
  const char* env = std::getenv("ATTNKIT_GDN_DECODE");
  const std::string v = env ? env : "";
  if (v == "slice64") return launch_decode_bv<64, 0>(p, s);
  if (v == "slice64_cs") return launch_decode_bv<64, 3>(p, s);
  if (v == "slice64_csld") return launch_decode_bv<64, 1>(p, s);
  if (v == "slice64_csst") return launch_decode_bv<64, 2>(p, s);
  if (v == "row128_cs") return launch_decode_bv<128, 3>(p, s);
  return launch_decode_warp_dt<true>(p, s);
}

}  // namespace attnkit::gdn_cuda
