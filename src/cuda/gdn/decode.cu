// Gated DeltaNet decode step: one token per sequence against a pool of fp32 states, updated in
// place. The kernel of GPUs other than sm_90 (and of GdnKernels::mma_sync); Hopper runs the TMA
// ring of decode_sm90.cu. Memory-bound: the state is streamed once (read + write) in 16-byte
// accesses. Work items are 128 x 64 column slices of one (sequence, value head) state; a
// persistent grid walks them and prefetches the next item (slot index, state slice,
// q/k/v/g/beta) into registers while it finishes the current one. The token element types are
// template arguments: with ld_any's run-time dtype branch each q/k/v/g/beta load was waited for
// where it was issued, five round trips per fetch. (Streaming cache hints, ld/st.global.cs, on
// the state loads, the stores or both measured no faster.)
// Using S_old only, both reductions happen in one pass:
//   kv = exp(g) S^T k,  sq = S^T q,  v' = beta (v - kv),  o = scale (exp(g) sq + (q.k) v'),
//   S <- exp(g) S + k v'^T.
#include <algorithm>

#include "cuda/common/cuda_check.h"
#include "cuda/common/resident_ctas.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

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
  float v;          // threads < kBV: column tid of v
  GateIn gate;      // threads < kBV: the head's gate inputs
};

// The pool slot of an item's sequence; loaded one item ahead of fetch() so that the state loads,
// which need it, never wait for it.
template <int kBV>
__device__ __forceinline__ int32_t item_slot(const DecodeParams& p, int item, int items) {
  if (item >= items) return -1;
  return p.indices[static_cast<int64_t>(item / (Cfg<kBV>::kSlices * p.HV)) * p.idx_stride];
}

template <int kBV, class T, class TB>
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
      it->s[i] = *reinterpret_cast<const float4*>(S + (rg + C::kRowGroups * i) * p.pool.sk);
  }
  if (tid < kHead) {
    it->q = ld_typed<T>(p.q.p, n * p.q.sb + hq * p.q.sh + tid);
    it->k = ld_typed<T>(p.k.p, n * p.k.sb + hq * p.k.sh + tid);
  }
  if (tid < kBV) {
    it->v = ld_typed<T>(p.v.p, n * p.v.sb + hv * p.v.sh + it->vb * kBV + tid);
    it->gate = load_gates<TB>(p, n, 0, hv);
  }
}

template <int kBV, class T, class TB>
__global__ void __launch_bounds__(kThreads, kBV == 32 ? 4 : 2) decode_kernel(DecodeParams p, int items) {
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
  fetch<kBV, T, TB>(p, item, item_slot<kBV>(p, item, items), &cur);
  while (true) {
    const int next = item + gridDim.x;
    const int32_t after_slot = item_slot<kBV>(p, next + gridDim.x, items);
    if (next < items) fetch<kBV, T, TB>(p, next, next_slot, &nxt);
    next_slot = after_slot;
    const int64_t o_off = cur.n * p.o.sb + cur.hv * p.o.sh + cur.vb * kBV;
    if (!cur.valid) {  // uniform across the block
      if (tid < kBV) static_cast<T*>(p.o.p)[o_off + tid] = from_f<T>(0.f);
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
        add_state_row(cur.s[i], sk_[r], sq_[r], pk, pq);
      }
      sum_over_row_lanes<C::kColGroups>(pk, pq);
      if (lane < C::kColGroups) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          red[warp][0][cg * 4 + j] = pk[j];
          red[warp][1][cg * 4 + j] = pq[j];
        }
      }
      __syncthreads();
      if (tid < kBV) {
        const float2 gates = step_gates(p, cur.gate);
        const float decay = gates.x;
        float kv = 0.f, sq = 0.f;
#pragma unroll
        for (int w = 0; w < kThreads / 32; ++w) {
          kv += red[w][0][tid];
          sq += red[w][1][tid];
        }
        kv *= kscale * decay;
        sq *= qscale;
        const float vd = gates.y * (cur.v - kv);
        vdelta[tid] = vd;
        dots[0][0] = decay;  // read after the barrier below, by which all dots reads are done
        static_cast<T*>(p.o.p)[o_off + tid] = from_f<T>(p.scale * (decay * sq + qk * vd));
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
        *reinterpret_cast<float4*>(S + r * p.pool.sk) = x;
      }
    }
    if (next >= items) break;
    cur = nxt;
    item = next;
  }
}

template <int kBV, class T, class TB>
Status launch_decode_bv(const DecodeParams& p, cudaStream_t s) {
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * Cfg<kBV>::kSlices;
  if (items > (int64_t(1) << 30)) return Status::Unsupported("gdn_decode_step: too many sequences x heads");
  constexpr auto kernel = &decode_kernel<kBV, T, TB>;
  int ctas = 0;
  ATTNKIT_RETURN_IF_ERROR(detail::resident_ctas<kernel>(kThreads, 0, &ctas));
  const int64_t grid = std::min<int64_t>(items, ctas);
  kernel<<<static_cast<unsigned>(grid), kThreads, 0, s>>>(p, static_cast<int>(items));
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn decode");
  return Status::Ok();
}

}  // namespace

Status launch_decode(const DecodeParams& p, cudaStream_t s) {
  if (p.N == 0 || p.HV == 0) return Status::Ok();
  return with_decode_types(p, [&](auto t, auto tb) {
    return launch_decode_bv<64, decltype(t), decltype(tb)>(p, s);
  });
}

}  // namespace attnkit::gdn_cuda
