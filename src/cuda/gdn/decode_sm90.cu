// Gated DeltaNet decode step on Hopper: one token per sequence against a pool of fp32 states,
// updated in place (decode.cu has the math and runs on other GPUs).
//
// Work items are whole 128 x 128 states of one (sequence, value head) (RingCfg allows 32 or 64
// column slices). With fewer states than SMs the dispatcher runs decode.cu's kernel instead
// (cuda_gdn_decode_step, gdn_entry.cu). A persistent CTA per SM walks items blockIdx.x, +
// gridDim.x, ... and keeps kStages of them in flight in a shared-memory ring: bulk async copies
// (cp.async.bulk global -> shared, one per run of contiguous rows, or per row when the pool's rows
// are padded; issued by warp 0) complete on the stage's mbarrier. Everything item j + kStages needs
// is requested right after item j's block barrier, together: its state (into the stage item j just
// released), its token inputs (q, k, v, g, beta and its pool slot, with typed loads into one of
// kStages + 1 register sets that the unrolled loop rotates through, so no register move waits for a
// load) and the pool slot of item j + 2 kStages (for the copy issued one ring turn later).
//
// One block barrier per item: every warp computes q.q, k.k and q.k itself (each lane holds 4 of the
// 128 elements; a row's k or q reaches its threads by shuffle), the per-warp column partials of
// S^T k and S^T q meet in shared memory (double-buffered by item parity, so the next item's
// writes never meet this item's reads), and each thread sums the warps for its own 4 columns. The
// updated state goes back from registers.
//
// Whole states, 3 stages, 1 CTA per SM (DecodeRing) measured fastest of the ring's shapes;
// 64-column items at 2 CTAs per SM spill registers with 3 stages (a 2-CTA SM allows 128
// registers a thread). The typed token loads are what let any ring depth help: with untyped ones
// each load waited where it was issued. The updated state goes back by register stores: bulk
// copies from the stage were no faster. At b32 the ring's own data movement, not the math,
// bounds the time, and 1024 states on 132 SMs leave 8 items on some SMs against 7.76 on average,
// whatever power-of-two split of a state.
#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include <algorithm>

#include "cuda/common/cuda_check.h"
#include "cuda/common/resident_ctas.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

constexpr int kRingThreads = 256;
constexpr int kRingWarps = kRingThreads / 32;

template <int kCols_, int kStages_, int kCtasPerSm_>
struct RingCfg {
  static constexpr int kCols = kCols_, kStages = kStages_, kCtasPerSm = kCtasPerSm_;
  static_assert(kCols == 32 || kCols == 64 || kCols == 128, "a warp covers whole float4 rows");
  static_assert(kStages >= 2, "a ring needs a stage being computed and one loading");
  static constexpr int kSets = kStages + 1;  // token register sets: items j .. j + kStages
  static constexpr int kSlices = kHead / kCols;
  static constexpr int kColGroups = kCols / 4;  // float4 per row
  static constexpr int kRowGroups = kRingThreads / kColGroups;
  static constexpr int kRowsPerThread = kHead / kRowGroups;
  static constexpr int kRowsPerLane = kHead / 32;  // rows whose copies one lane of warp 0 issues
  static constexpr uint32_t kStageBytes = kHead * kCols * sizeof(float);
};

template <class C>
struct RingSmem {
  float stage[C::kStages][kHead * C::kCols];
  float red[2][kRingWarps][2][C::kCols];  // [item parity][warp][S^T k, S^T q][column]
  uint64_t full[C::kStages];
};

// The token inputs of one item.
struct Tokens {
  int32_t slot;
  int32_t ahead_slot;  // warp 0: the pool slot of the item kStages later (its copy's source)
  float q[4], k[4];    // elements lane + 32 m: every warp holds the whole q and k head vectors
  float v[4];          // the thread's 4 columns
  GateIn gate;
};

template <class C>
__device__ __forceinline__ int32_t slot_of(const DecodeParams& p, int item) {
  return p.indices[static_cast<int64_t>(item / (C::kSlices * p.HV)) * p.idx_stride];
}

__device__ __forceinline__ bool slot_valid(const DecodeParams& p, int32_t slot) {
  return slot >= 0 && slot < p.pool.rows;
}

template <class C, class T, class TB>
__device__ __forceinline__ void load_tokens(const DecodeParams& p, int item, int ahead_item, int items, Tokens* t) {
  const int lane = threadIdx.x & 31, cg = threadIdx.x % C::kColGroups;
  const int vb = item % C::kSlices, hv = (item / C::kSlices) % p.HV, n = item / (C::kSlices * p.HV);
  const int hq = hv / (p.HV / p.H);
  t->slot = p.indices[static_cast<int64_t>(n) * p.idx_stride];
  if (threadIdx.x < 32 && ahead_item < items) t->ahead_slot = slot_of<C>(p, ahead_item);
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    t->q[m] = ld_typed<T>(p.q.p, n * p.q.sb + hq * p.q.sh + lane + 32 * m);
    t->k[m] = ld_typed<T>(p.k.p, n * p.k.sb + hq * p.k.sh + lane + 32 * m);
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) t->v[j] = ld_typed<T>(p.v.p, n * p.v.sb + hv * p.v.sh + vb * C::kCols + cg * 4 + j);
  t->gate = load_gates<TB>(p, n, 0, hv);
}

// The item's state slice in the pool (slot valid).
template <class C>
__device__ __forceinline__ float* slice_ptr(const DecodeParams& p, int item, int32_t slot) {
  const int vb = item % C::kSlices, hv = (item / C::kSlices) % p.HV;
  return static_cast<float*>(p.pool.p) + slot * p.pool.s0 + hv * p.pool.sh + vb * C::kCols;
}

// Warp 0: the item's state slice into stage s. An item without a state (slot out of range) only
// arrives, so the stage's phases stay one per item.
template <class C>
__device__ __forceinline__ void issue_load(const DecodeParams& p, RingSmem<C>& sm, int s, int item, int32_t slot) {
  using Bar = cutlass::arch::ClusterTransactionBarrier;
  const int lane = threadIdx.x & 31;
  const bool valid = slot_valid(p, slot);
  if (lane == 0) {
    if (valid) Bar::arrive_and_expect_tx(&sm.full[s], C::kStageBytes);
    else Bar::arrive(&sm.full[s]);
  }
  if (!valid) return;
  __syncwarp();  // the expected bytes are posted before any copy can complete
  const float* src = slice_ptr<C>(p, item, slot);
  float* dst = sm.stage[s];
  const int r0 = lane * C::kRowsPerLane;
  if (p.pool.sk == C::kCols) {
    cute::SM90_BULK_COPY_G2S::copy(src + r0 * C::kCols, &sm.full[s], dst + r0 * C::kCols,
                                   C::kRowsPerLane * C::kCols * sizeof(float));
  } else {
#pragma unroll
    for (int i = 0; i < C::kRowsPerLane; ++i)
      cute::SM90_BULK_COPY_G2S::copy(src + (r0 + i) * p.pool.sk, &sm.full[s], dst + (r0 + i) * C::kCols,
                                     C::kCols * sizeof(float));
  }
}

// Item j of this CTA (tokens `cur`); after its barrier, requests item j + kStages (state into the
// stage item j leaves, tokens into `ahead`, whose item j - 1 is done).
template <class C, class T, class TB>
__device__ __forceinline__ void step(const DecodeParams& p, RingSmem<C>& sm, int j, int mine, int items,
                                     const Tokens& cur, Tokens& ahead) {
  using Bar = cutlass::arch::ClusterTransactionBarrier;
  constexpr int S = C::kStages, kCG = C::kColGroups, kRG = C::kRowGroups, kRows = C::kRowsPerThread;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cg = tid % kCG, rg = tid / kCG;
  const int item = blockIdx.x + j * gridDim.x, s = j % S;

  const bool valid = slot_valid(p, cur.slot);  // uniform across the block
  float4 x[kRows];
  float qk = 0.f, qscale = 1.f, kscale = 1.f;
  if (valid) {
    float qq = 0.f, kk = 0.f;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      qq += cur.q[m] * cur.q[m];
      kk += cur.k[m] * cur.k[m];
      qk += cur.q[m] * cur.k[m];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      qq += __shfl_xor_sync(0xffffffffu, qq, o);
      kk += __shfl_xor_sync(0xffffffffu, kk, o);
      qk += __shfl_xor_sync(0xffffffffu, qk, o);
    }
    if (p.l2norm) {
      qscale = rsqrtf(qq + 1e-6f);
      kscale = rsqrtf(kk + 1e-6f);
    }
    qk *= qscale * kscale;

    Bar::wait(&sm.full[s], (j / S) & 1);
    const float* st = sm.stage[s];
#pragma unroll
    for (int i = 0; i < kRows; ++i) x[i] = *reinterpret_cast<const float4*>(st + (rg + kRG * i) * C::kCols + cg * 4);
    float pk[4] = {0, 0, 0, 0}, pq[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      // Row rg + kRG i sits in lane (rg + kRG i) % 32, element (kRG i) / 32 (rg < kRG <= 32).
      const int src = (rg + kRG * i) & 31;
      const float kr = __shfl_sync(0xffffffffu, cur.k[(kRG * i) >> 5], src);
      const float qr = __shfl_sync(0xffffffffu, cur.q[(kRG * i) >> 5], src);
      add_state_row(x[i], kr, qr, pk, pq);
    }
    sum_over_row_lanes<kCG>(pk, pq);
    if (lane < kCG) {
      *reinterpret_cast<float4*>(&sm.red[j & 1][warp][0][cg * 4]) = make_float4(pk[0], pk[1], pk[2], pk[3]);
      *reinterpret_cast<float4*>(&sm.red[j & 1][warp][1][cg * 4]) = make_float4(pq[0], pq[1], pq[2], pq[3]);
    }
  }
  __syncthreads();
  if (j + S < mine) {
    const int next = item + S * gridDim.x;
    if (warp == 0) issue_load(p, sm, s, next, cur.ahead_slot);
    load_tokens<C, T, TB>(p, next, next + S * gridDim.x, items, &ahead);
  }

  const int vb = item % C::kSlices, hv = (item / C::kSlices) % p.HV, n = item / (C::kSlices * p.HV);
  const int64_t o_off = n * p.o.sb + hv * p.o.sh + vb * C::kCols + cg * 4;
  if (valid) {
    float kv[4] = {0, 0, 0, 0}, sq[4] = {0, 0, 0, 0};
#pragma unroll
    for (int w = 0; w < kRingWarps; ++w) {
      const float4 a = *reinterpret_cast<const float4*>(&sm.red[j & 1][w][0][cg * 4]);
      const float4 b = *reinterpret_cast<const float4*>(&sm.red[j & 1][w][1][cg * 4]);
      kv[0] += a.x, kv[1] += a.y, kv[2] += a.z, kv[3] += a.w;
      sq[0] += b.x, sq[1] += b.y, sq[2] += b.z, sq[3] += b.w;
    }
    const float2 gates = step_gates(p, cur.gate);
    const float decay = gates.x;
    float vd[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      vd[c] = gates.y * (cur.v[c] - kv[c] * kscale * decay);
      if (rg == 0) static_cast<T*>(p.o.p)[o_off + c] = from_f<T>(p.scale * (decay * sq[c] * qscale + qk * vd[c]));
    }
    float* out = slice_ptr<C>(p, item, cur.slot) + cg * 4;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = rg + kRG * i;
      const float kr = __shfl_sync(0xffffffffu, cur.k[(kRG * i) >> 5], r & 31) * kscale;
      float4 y = x[i];
      y.x = decay * y.x + kr * vd[0];
      y.y = decay * y.y + kr * vd[1];
      y.z = decay * y.z + kr * vd[2];
      y.w = decay * y.w + kr * vd[3];
      *reinterpret_cast<float4*>(out + r * p.pool.sk) = y;
    }
  } else if (rg == 0) {
#pragma unroll
    for (int c = 0; c < 4; ++c) static_cast<T*>(p.o.p)[o_off + c] = from_f<T>(0.f);
  }
}

template <class C, class T, class TB>
__global__ void __launch_bounds__(kRingThreads, C::kCtasPerSm) decode_ring_kernel(const DecodeParams p, int items) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Bar = cutlass::arch::ClusterTransactionBarrier;
  constexpr int S = C::kStages, D = C::kSets;
  extern __shared__ __align__(128) char smem_raw[];
  auto& sm = *reinterpret_cast<RingSmem<C>*>(smem_raw);
  const int first = blockIdx.x, stride = gridDim.x;
  const int mine = (items - first + stride - 1) / stride;  // >= 1: the grid is at most `items`

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) Bar::init(&sm.full[s], 1);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  Tokens t[D];
#pragma unroll
  for (int j = 0; j < S; ++j) {
    if (j < mine) {
      const int item = first + j * stride;
      if (threadIdx.x < 32) issue_load(p, sm, j, item, slot_of<C>(p, item));
      load_tokens<C, T, TB>(p, item, item + S * stride, items, &t[j]);
    }
  }
  // Item j uses set j % D; the loop is unrolled by D so that every set index is static.
  for (int j0 = 0; j0 < mine; j0 += D) {
#pragma unroll
    for (int u = 0; u < D; ++u) {
      if (j0 + u >= mine) break;
      step<C, T, TB>(p, sm, j0 + u, mine, items, t[u], t[(u + S) % D]);
    }
  }
#endif
}

template <class C, class T, class TB>
Status launch_ring_t(const DecodeParams& p, cudaStream_t s) {
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * C::kSlices;
  if (items > (int64_t(1) << 30)) return Status::Unsupported("gdn_decode_step: too many sequences x heads");
  constexpr int kSmem = static_cast<int>(sizeof(RingSmem<C>));
  static_assert(kSmem * C::kCtasPerSm <= 227 * 1024, "the ring exceeds a Hopper SM's shared memory");
  constexpr auto kernel = &decode_ring_kernel<C, T, TB>;
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  int ctas = 0;
  ATTNKIT_RETURN_IF_ERROR(detail::resident_ctas<kernel>(kRingThreads, kSmem, &ctas));
  const int64_t grid = std::min<int64_t>(items, ctas);
  kernel<<<static_cast<unsigned>(grid), kRingThreads, kSmem, s>>>(p, static_cast<int>(items));
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn decode (sm90)");
  return Status::Ok();
}

template <class C>
Status launch_ring(const DecodeParams& p, cudaStream_t s) {
  return with_decode_types(p, [&](auto t, auto tb) { return launch_ring_t<C, decltype(t), decltype(tb)>(p, s); });
}

using DecodeRing = RingCfg<128, 3, 1>;

}  // namespace

Status launch_decode_sm90(const DecodeParams& p, cudaStream_t s) {
  if (p.N == 0 || p.HV == 0) return Status::Ok();
  return launch_ring<DecodeRing>(p, s);
}

}  // namespace attnkit::gdn_cuda
