// Gated DeltaNet decode step for a key-last state pool ([P, HV, V, K], the layout vLLM, SGLang and
// FlashInfer keep; attnkit sees it as the [P, HV, K, V] view with sk = 1, sv = K). Each value row
// S^T[v, :] is contiguous over the 128 keys, so a warp owns whole rows (32 lanes x float4) and
// reduces S^T k and S^T q over its lanes by shuffles: no shared memory, no block barrier.
// A block of kWarps warps takes kRows value rows of one (sequence, value head) state; every warp
// loads all of its rows before the first reduction. The math is decode.cu's:
//   kv = exp(g) S^T k,  sq = S^T q,  v' = beta (v - kv),  o = scale (exp(g) sq + (q.k) v'),
//   S <- exp(g) S + k v'^T.
#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 64;                    // value rows per block
constexpr int kRowsPerWarp = kRows / kWarps;
constexpr int kSlices = kHead / kRows;

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float dot4(const float4& s, const float (&x)[4]) {
  return s.x * x[0] + s.y * x[1] + s.z * x[2] + s.w * x[3];
}

template <class T, class TB>
__global__ void __launch_bounds__(kWarps * 32) decode_key_last_kernel(DecodeParams p) {
  const int item = blockIdx.x;
  const int vb = item % kSlices, hv = (item / kSlices) % p.HV, n = item / (kSlices * p.HV);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, hq = hv / (p.HV / p.H);
  const int v0 = vb * kRows + warp * kRowsPerWarp;
  const int64_t o_off = n * p.o.sb + hv * p.o.sh;
  const int32_t slot = p.indices[static_cast<int64_t>(n) * p.idx_stride];
  // An out-of-range slot (negative marks padding) means no state: output zero, no state touched.
  if (slot < 0 || slot >= p.pool.rows) {
    if (lane < kRowsPerWarp) static_cast<T*>(p.o.p)[o_off + v0 + lane] = from_f<T>(0.f);
    return;
  }
  float* S = static_cast<float*>(p.pool.p) + p.pool.at(slot, hv, 4 * lane, 0);
  float4 s[kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j)
    s[j] = *reinterpret_cast<const float4*>(S + (v0 + j) * p.pool.sv);

  float q[4], k[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    q[e] = ld_typed<T>(p.q.p, n * p.q.sb + hq * p.q.sh + 4 * lane + e);
    k[e] = ld_typed<T>(p.k.p, n * p.k.sb + hq * p.k.sh + 4 * lane + e);
  }
  const float2 gates = step_gates(p, load_gates<TB>(p, n, 0, hv));
  const float decay = gates.x, beta = gates.y;
  float qscale = 1.f, kscale = 1.f;
  if (p.l2norm) {
    qscale = rsqrtf(warp_sum(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]) + 1e-6f);
    kscale = rsqrtf(warp_sum(k[0] * k[0] + k[1] * k[1] + k[2] * k[2] + k[3] * k[3]) + 1e-6f);
  }
  const float qk = warp_sum(q[0] * k[0] + q[1] * k[1] + q[2] * k[2] + q[3] * k[3]) * qscale * kscale;
#pragma unroll
  for (int e = 0; e < 4; ++e) k[e] *= kscale;

#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int v = v0 + j;
    const float kv = decay * warp_sum(dot4(s[j], k));
    const float sq = qscale * warp_sum(dot4(s[j], q));
    const float vd = beta * (ld_typed<T>(p.v.p, n * p.v.sb + hv * p.v.sh + v) - kv);
    if (lane == 0) static_cast<T*>(p.o.p)[o_off + v] = from_f<T>(p.scale * (decay * sq + qk * vd));
    float4 x = s[j];
    x.x = decay * x.x + k[0] * vd;
    x.y = decay * x.y + k[1] * vd;
    x.z = decay * x.z + k[2] * vd;
    x.w = decay * x.w + k[3] * vd;
    *reinterpret_cast<float4*>(S + v * p.pool.sv) = x;
  }
}

}  // namespace

Status launch_decode_key_last(const DecodeParams& p, cudaStream_t s) {
  if (p.N == 0 || p.HV == 0) return Status::Ok();
  const int64_t items = static_cast<int64_t>(p.N) * p.HV * kSlices;
  if (items > (int64_t(1) << 31) - 1)
    return Status::Unsupported("gdn_decode_step: too many sequences x heads");
  return with_decode_types(p, [&](auto t, auto tb) {
    decode_key_last_kernel<decltype(t), decltype(tb)>
        <<<static_cast<unsigned>(items), kWarps * 32, 0, s>>>(p);
    ATTNKIT_CUDA_CHECK_LAUNCH("gdn decode (key-last pool)");
    return Status::Ok();
  });
}

}  // namespace attnkit::gdn_cuda
