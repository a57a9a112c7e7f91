// Gated DeltaNet decode of T new tokens per sequence (speculative verification), with the state
// after each token written to step_states and the pool written only with update_pool. One CTA per
// 128 x 64 column slice of one (sequence, value head) state: the slice is read once into
// registers, goes through the T tokens there, and is written after each token to step_states[n, t]
// and after the last to the pool. The per-token math is decode.cu's:
//   kv = exp(g) S^T k,  sq = S^T q,  v' = beta (v - kv),  o = scale (exp(g) sq + (q.k) v'),
//   S <- exp(g) S + k v'^T.
// State elements are addressed through their strides one by one, so the pool and step_states may
// each be V-contiguous or key-last.
#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kCols = 64;                        // state columns per CTA
constexpr int kSlices = kHead / kCols;
constexpr int kColGroups = kCols / 4;            // threads along the columns, 4 columns each
constexpr int kRowGroups = kThreads / kColGroups;
constexpr int kRowsPerThread = kHead / kRowGroups;

// Element offset of S[k, v] within a state (its (slot, head) base added by the caller).
__device__ __forceinline__ int64_t elem(const StateT& s, int k, int v) { return k * s.sk + v * s.sv; }

__device__ __forceinline__ void load_rows(const float* S, const StateT& st, int rg, int c0,
                                          float4 (&s)[kRowsPerThread]) {
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int r = rg + kRowGroups * i;
    s[i] = make_float4(S[elem(st, r, c0)], S[elem(st, r, c0 + 1)], S[elem(st, r, c0 + 2)],
                       S[elem(st, r, c0 + 3)]);
  }
}

__device__ __forceinline__ void store_rows(float* S, const StateT& st, int rg, int c0,
                                           const float4 (&s)[kRowsPerThread]) {
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int r = rg + kRowGroups * i;
    S[elem(st, r, c0)] = s[i].x;
    S[elem(st, r, c0 + 1)] = s[i].y;
    S[elem(st, r, c0 + 2)] = s[i].z;
    S[elem(st, r, c0 + 3)] = s[i].w;
  }
}

template <class T, class TB>
__global__ void __launch_bounds__(kThreads) decode_multi_kernel(DecodeParams p) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cg = tid % kColGroups, rg = tid / kColGroups;
  const int item = blockIdx.x;
  const int vb = item % kSlices, hv = (item / kSlices) % p.HV, n = item / (kSlices * p.HV);
  const int hq = hv / (p.HV / p.H), c0 = vb * kCols + cg * 4;
  __shared__ float sq_[kHead], sk_[kHead];
  __shared__ float red[kThreads / 32][2][kCols];
  __shared__ float vdelta[kCols];
  __shared__ float dots[3][4];
  __shared__ float decay_s;

  const int32_t slot = p.indices[static_cast<int64_t>(n) * p.idx_stride];
  if (slot < 0 || slot >= p.pool.rows) {  // padding or out of range: zero outputs, no state
    for (int t = 0; t < p.T; ++t)
      if (tid < kCols)
        static_cast<T*>(p.o.p)[n * p.o.sb + t * p.o.st + hv * p.o.sh + vb * kCols + tid] =
            from_f<T>(0.f);
    return;
  }
  float* pool = static_cast<float*>(p.pool.p) + slot * p.pool.s0 + hv * p.pool.sh;
  float4 s[kRowsPerThread];
  load_rows(pool, p.pool, rg, c0, s);

  for (int t = 0; t < p.T; ++t) {
    __syncthreads();  // the previous token's readers of the shared arrays are done
    if (tid < kHead) {
      const float q = ld_typed<T>(p.q.p, n * p.q.sb + t * p.q.st + hq * p.q.sh + tid);
      const float k = ld_typed<T>(p.k.p, n * p.k.sb + t * p.k.st + hq * p.k.sh + tid);
      sq_[tid] = q;
      sk_[tid] = k;
      float a = q * q, b = k * k, c = q * k;
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
      const int r = rg + kRowGroups * i;
      add_state_row(s[i], sk_[r], sq_[r], pk, pq);
    }
    sum_over_row_lanes<kColGroups>(pk, pq);
    if (lane < kColGroups) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        red[warp][0][cg * 4 + j] = pk[j];
        red[warp][1][cg * 4 + j] = pq[j];
      }
    }
    __syncthreads();
    if (tid < kCols) {
      const float2 gates = step_gates(p, load_gates<TB>(p, n, t, hv));
      const float decay = gates.x;
      float kv = 0.f, sq = 0.f;
#pragma unroll
      for (int w = 0; w < kThreads / 32; ++w) {
        kv += red[w][0][tid];
        sq += red[w][1][tid];
      }
      kv *= kscale * decay;
      sq *= qscale;
      const int col = vb * kCols + tid;
      const float vd = gates.y * (ld_typed<T>(p.v.p, n * p.v.sb + t * p.v.st + hv * p.v.sh + col) - kv);
      vdelta[tid] = vd;
      if (tid == 0) decay_s = decay;
      static_cast<T*>(p.o.p)[n * p.o.sb + t * p.o.st + hv * p.o.sh + col] =
          from_f<T>(p.scale * (decay * sq + qk * vd));
    }
    __syncthreads();
    const float decay = decay_s;
    const float4 vd = *reinterpret_cast<const float4*>(&vdelta[cg * 4]);
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const float kr = sk_[rg + kRowGroups * i] * kscale;
      s[i].x = decay * s[i].x + kr * vd.x;
      s[i].y = decay * s[i].y + kr * vd.y;
      s[i].z = decay * s[i].z + kr * vd.z;
      s[i].w = decay * s[i].w + kr * vd.w;
    }
    if (p.steps.defined())
      store_rows(static_cast<float*>(p.steps.p) + n * p.steps.s0 + t * p.steps_st + hv * p.steps.sh,
                 p.steps, rg, c0, s);
  }
  if (p.update_pool) store_rows(pool, p.pool, rg, c0, s);
}

}  // namespace

Status launch_decode_multi(const DecodeParams& p, cudaStream_t s) {
  if (p.N == 0 || p.HV == 0) return Status::Ok();
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * kSlices;
  if (items > 0x7fffffff) return Status::Unsupported("gdn_decode_step: too many sequences x heads");
  return with_decode_types(p, [&](auto t, auto tb) {
    decode_multi_kernel<decltype(t), decltype(tb)>
        <<<static_cast<unsigned>(items), kThreads, 0, s>>>(p);
    ATTNKIT_CUDA_CHECK_LAUNCH("gdn multi-token decode");
    return Status::Ok();
  });
}

}  // namespace attnkit::gdn_cuda
