// Gated DeltaNet decode step with the state streamed through a shared-memory ring (the default
// kernel; decode.cu's register-prefetch kernel stays for ATTNKIT_GDN_DECODE_REG_PREFETCH=1).
// Memory-bound: each 128 x 64 fp32 column slice of a (sequence, value head) state is read once
// and written once. The register-prefetch kernel had one slice in flight per CTA, and only part of
// one on average (the next slice's loads start once the current slice has fully arrived); here
// each CTA keeps kStages - 1 slices loading while it updates the current one, without the
// registers that would cost. On sm_90 the slices come by bulk copies (the TMA engine, one per
// 256-byte row, completing on the stage's mbarrier); elsewhere by cp.async, every thread copying
// exactly the 16-byte pieces it later reads, so that cp.async.wait_group orders its own data.
// The pool slot of an item is loaded two items before its slice's copies start, and q/k/v/g/beta
// one item before its update, into registers that alternate between even and odd items (the loop
// is unrolled by two), so no register move ever waits on a load in flight.
// Same math as decode.cu: kv = exp(g) S^T k, sq = S^T q, v' = beta (v - kv),
// o = scale (exp(g) sq + (q.k) v'), S <- exp(g) S + k v'^T.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_bulk.cuh"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBV = 64;                     // state columns per item
constexpr int kSlices = kHead / kBV;
constexpr int kColGroups = kBV / 4;         // float4 columns
constexpr int kRowGroups = kThreads / kColGroups;
constexpr int kRowsPerThread = kHead / kRowGroups;
constexpr int kStages = 3;
constexpr int kSliceFloats = kHead * kBV;

struct Small {  // one item's token inputs, loaded an item ahead
  int n, hv, vb;
  int32_t slot;
  float q, k;        // threads < 128: element tid of q / k
  float v, g, beta;  // threads < 64: column tid of v; g and beta of the head
};

__device__ __forceinline__ int32_t ring_slot(const DecodeParams& p, int64_t item, int64_t items) {
  if (item >= items) return -1;
  return p.indices[(item / (kSlices * p.HV)) * p.idx_stride];
}
__device__ __forceinline__ bool slot_ok(const DecodeParams& p, int32_t slot) {
  return slot >= 0 && slot < p.pool.rows;
}

__device__ __forceinline__ void load_small(const DecodeParams& p, int64_t item, int64_t items, Small* s) {
  if (item >= items) return;
  const int tid = threadIdx.x;
  s->vb = static_cast<int>(item % kSlices);
  s->hv = static_cast<int>((item / kSlices) % p.HV);
  s->n = static_cast<int>(item / (kSlices * p.HV));
  s->slot = p.indices[static_cast<int64_t>(s->n) * p.idx_stride];
  const int n = s->n, hv = s->hv, hq = hv / (p.HV / p.H);
  if (tid < kHead) {
    s->q = ld_any(p.q.p, p.q.dt, n * p.q.sb + hq * p.q.sh + tid);
    s->k = ld_any(p.k.p, p.k.dt, n * p.k.sb + hq * p.k.sh + tid);
  }
  if (tid < kBV) {
    s->v = ld_any(p.v.p, p.v.dt, n * p.v.sb + hv * p.v.sh + s->vb * kBV + tid);
    s->g = ld_any(p.g.p, 0, n * p.g.sb + hv * p.g.sh);
    s->beta = ld_any(p.beta.p, p.beta.dt, n * p.beta.sb + hv * p.beta.sh);
  }
}

// Starts an item's slice copies into a stage. kBulk: warp 0 issues one bulk copy per 256-byte row,
// completing on the stage's mbarrier, which gets exactly one arrival per fill (with no bytes when
// the item has no state). Otherwise: this thread's share (rows rg + kRowGroups i, float4 column
// cg, the pieces it reads later) as one cp.async commit group (empty when the item has no state).
template <bool kBulk>
__device__ __forceinline__ void issue_slice(const DecodeParams& p, int64_t item, int64_t items, int32_t slot,
                                            float* stage, uint64_t* bar) {
  if (kBulk) {
    if (item < items && slot_ok(p, slot)) {
      if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const int hv = static_cast<int>((item / kSlices) % p.HV), vb = static_cast<int>(item % kSlices);
        const float* S = static_cast<const float*>(p.pool.p) + slot * p.pool.s0 + hv * p.pool.sh + vb * kBV;
        fence_proxy_async_smem();  // the stage's last reads came before a barrier this thread passed
        if (lane == 0) mbar_arrive_expect(bar, kSliceFloats * sizeof(float));
        __syncwarp();
        for (int r = lane; r < kHead; r += 32) bulk_g2s(stage + r * kBV, S + r * p.pool.sk, kBV * sizeof(float), bar);
      }
    } else if (threadIdx.x == 0) {
      mbar_arrive_expect(bar, 0);
    }
    return;
  }
  if (item < items && slot_ok(p, slot)) {
    const int tid = threadIdx.x, cg = tid % kColGroups, rg = tid / kColGroups;
    const int hv = static_cast<int>((item / kSlices) % p.HV), vb = static_cast<int>(item % kSlices);
    const float* S = static_cast<const float*>(p.pool.p) + slot * p.pool.s0 + hv * p.pool.sh + vb * kBV + cg * 4;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int r = rg + kRowGroups * i;
      cp_async16(stage + r * kBV + cg * 4, S + r * p.pool.sk, true);
    }
  }
  cp_async_commit();
}

struct Shared {
  float ring[kStages][kSliceFloats];
  uint64_t bar[kStages];  // kBulk: each stage's fills complete here
  float sq[kHead], sk[kHead];
  float red[kThreads / 32][2][kBV];
  float vdelta[kBV];
  float dots[3][4];
  float decay;
};

// Item `item` (uniform): starts the copies of item + kStages - 1 (its slot in `issue_slot`, which
// then takes the slot of the item kStages items after that one's), loads `nxt` for item + stride,
// then updates the state of `item` from its stage with `cur`.
template <bool kBulk>
__device__ __forceinline__ void ring_step(const DecodeParams& p, Shared& sm, int64_t item, int64_t items,
                                          int64_t stride, int k, int32_t& issue_slot, const Small& cur,
                                          Small& nxt) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cg = tid % kColGroups, rg = tid / kColGroups;
  issue_slice<kBulk>(p, item + (kStages - 1) * stride, items, issue_slot, sm.ring[(k + kStages - 1) % kStages],
                     &sm.bar[(k + kStages - 1) % kStages]);
  issue_slot = ring_slot(p, item + (kStages + 1) * stride, items);
  load_small(p, item + stride, items, &nxt);
  // Item k sits in stage k % kStages, that stage's (k / kStages)-th fill.
  if (kBulk) mbar_wait(&sm.bar[k % kStages], (k / kStages) & 1);
  else cp_async_wait<kStages - 1>();  // this item's group: all but the kStages - 1 newest

  const int64_t o_off = cur.n * p.o.sb + cur.hv * p.o.sh + cur.vb * kBV;
  if (!slot_ok(p, cur.slot)) {  // uniform: no state, zero output row
    if (tid < kBV) st_any(p.o.p, p.o.dt, o_off + tid, 0.f);
    // kBulk: no thread may refill a stage (the next step) before every thread has waited on this
    // one's phase; otherwise a slow waiter could see the barrier two phases on and wait forever.
    if (kBulk) __syncthreads();
    return;
  }
  const float* stage = sm.ring[k % kStages];
  __syncthreads();  // the previous item's readers of the shared vectors are done
  if (tid < kHead) {
    sm.sq[tid] = cur.q;
    sm.sk[tid] = cur.k;
    float a = cur.q * cur.q, b = cur.k * cur.k, c = cur.q * cur.k;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      a += __shfl_xor_sync(0xffffffffu, a, o);
      b += __shfl_xor_sync(0xffffffffu, b, o);
      c += __shfl_xor_sync(0xffffffffu, c, o);
    }
    if (lane == 0) {
      sm.dots[0][warp] = a;
      sm.dots[1][warp] = b;
      sm.dots[2][warp] = c;
    }
  }
  __syncthreads();
  float qscale = 1.f, kscale = 1.f;
  if (p.l2norm) {
    qscale = rsqrtf(sm.dots[0][0] + sm.dots[0][1] + sm.dots[0][2] + sm.dots[0][3] + 1e-6f);
    kscale = rsqrtf(sm.dots[1][0] + sm.dots[1][1] + sm.dots[1][2] + sm.dots[1][3] + 1e-6f);
  }
  const float qk = (sm.dots[2][0] + sm.dots[2][1] + sm.dots[2][2] + sm.dots[2][3]) * qscale * kscale;

  float4 s[kRowsPerThread];
  float pk[4] = {0, 0, 0, 0}, pq[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int r = rg + kRowGroups * i;
    s[i] = *reinterpret_cast<const float4*>(stage + r * kBV + cg * 4);
    const float kr = sm.sk[r], qr = sm.sq[r];
    const float v[4] = {s[i].x, s[i].y, s[i].z, s[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      pk[j] += v[j] * kr;
      pq[j] += v[j] * qr;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int o = kColGroups; o < 32; o <<= 1) {
      pk[j] += __shfl_xor_sync(0xffffffffu, pk[j], o);
      pq[j] += __shfl_xor_sync(0xffffffffu, pq[j], o);
    }
  }
  if (lane < kColGroups) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sm.red[warp][0][cg * 4 + j] = pk[j];
      sm.red[warp][1][cg * 4 + j] = pq[j];
    }
  }
  __syncthreads();
  if (tid < kBV) {
    const float decay = __expf(cur.g);
    float kv = 0.f, sq = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) {
      kv += sm.red[w][0][tid];
      sq += sm.red[w][1][tid];
    }
    kv *= kscale * decay;
    sq *= qscale;
    const float vd = cur.beta * (cur.v - kv);
    sm.vdelta[tid] = vd;
    if (tid == 0) sm.decay = decay;
    st_any(p.o.p, p.o.dt, o_off + tid, p.scale * (decay * sq + qk * vd));
  }
  __syncthreads();
  const float decay = sm.decay;
  const float4 vd = *reinterpret_cast<const float4*>(&sm.vdelta[cg * 4]);
  float* S = static_cast<float*>(p.pool.p) + cur.slot * p.pool.s0 + cur.hv * p.pool.sh + cur.vb * kBV + cg * 4;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int r = rg + kRowGroups * i;
    const float kr = sm.sk[r] * kscale;
    float4 x = s[i];
    x.x = decay * x.x + kr * vd.x;
    x.y = decay * x.y + kr * vd.y;
    x.z = decay * x.z + kr * vd.z;
    x.w = decay * x.w + kr * vd.w;
    *reinterpret_cast<float4*>(S + r * p.pool.sk) = x;
  }
}

template <bool kBulk>
__global__ void __launch_bounds__(kThreads, 2) decode_ring_kernel(DecodeParams p, int64_t items) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Shared& sm = *reinterpret_cast<Shared*>(smem_raw);
  const int64_t first = blockIdx.x, stride = gridDim.x;
  if (first >= items) return;
  if (kBulk) {
    if (threadIdx.x == 0)
      for (int j = 0; j < kStages; ++j) mbar_init(&sm.bar[j]);
    __syncthreads();
  }
  // Prologue: the first kStages - 1 items' copies, and the slots of the next two to issue.
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j)
    issue_slice<kBulk>(p, first + j * stride, items, ring_slot(p, first + j * stride, items), sm.ring[j], &sm.bar[j]);
  int32_t slot_a = ring_slot(p, first + (kStages - 1) * stride, items);
  int32_t slot_b = ring_slot(p, first + kStages * stride, items);
  Small even, odd;
  load_small(p, first, items, &even);
  for (int k = 0;; k += 2) {
    const int64_t item = first + k * stride;
    ring_step<kBulk>(p, sm, item, items, stride, k, slot_a, even, odd);
    if (item + stride >= items) break;
    ring_step<kBulk>(p, sm, item + stride, items, stride, k + 1, slot_b, odd, even);
    if (item + 2 * stride >= items) break;
  }
  // No copy may still target shared memory when the CTA exits: every fill of a valid item was
  // waited for (bulk), or wait for all (cp.async).
  if (!kBulk) cp_async_wait<0>();
}

}  // namespace

// Bulk copies on sm_90 devices of builds with sm_90a code, unless ATTNKIT_GDN_DECODE_NO_BULK=1
// (tests, side-by-side timings); cp.async elsewhere.
Status launch_decode_ring(const DecodeParams& p, cudaStream_t s) {
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * kSlices;
  if (items == 0) return Status::Ok();
  const int smem = static_cast<int>(sizeof(Shared));
  // Per device, cached (the queries cost host time on every decode step otherwise): the grid fill
  // and whether the device is an sm_90 one.
  static std::atomic<int> fill[64] = {};
  static std::atomic<int> is_sm90[64] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&dev));
  int ctas = dev < 64 ? fill[dev].load(std::memory_order_relaxed) : 0;
  int sm90 = dev < 64 ? is_sm90[dev].load(std::memory_order_relaxed) : 0;
  if (ctas == 0 || sm90 == 0) {
    int major = 0, minor = 0;
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    sm90 = major == 9 && minor == 0 ? 2 : 1;
    int sms = 0, per_sm = 0;
    for (auto* k : {decode_ring_kernel<false>, decode_ring_kernel<true>})
      ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ATTNKIT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_ring_kernel<false>, kThreads, smem));
    ctas = sms * (per_sm < 1 ? 1 : per_sm);
    if (dev < 64) {
      fill[dev].store(ctas, std::memory_order_relaxed);
      is_sm90[dev].store(sm90, std::memory_order_relaxed);
    }
  }
#if defined(ATTNKIT_HAS_SM90A)
  const char* env = std::getenv("ATTNKIT_GDN_DECODE_NO_BULK");
  const bool bulk = sm90 == 2 && !(env != nullptr && env[0] == '1' && env[1] == '\0');
#else
  const bool bulk = false;
#endif
  // As few CTAs as give each the same number of items (the last perhaps fewer): no final round
  // in which only some CTAs still stream.
  const int64_t rounds = (items + ctas - 1) / ctas;
  const int64_t grid = (items + rounds - 1) / rounds;
  if (bulk) decode_ring_kernel<true><<<static_cast<unsigned>(grid), kThreads, smem, s>>>(p, items);
  else decode_ring_kernel<false><<<static_cast<unsigned>(grid), kThreads, smem, s>>>(p, items);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn decode (ring)");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
