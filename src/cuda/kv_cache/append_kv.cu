// append_kv_cache on the GPU: one warp per (token, KV head), K then V. FP8 caches encode with the
// same fp32 operations as the CPU reference (IEEE division, round to nearest even, saturation), so
// the two agree bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "api/kv_cache_backends.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"

namespace attnkit::detail {
namespace {

constexpr int kWarps = 8;

// One cache (K or V) and its scale, as the kernel indexes them.
struct CacheSide {
  const void* src;
  int64_t src_t, src_h;  // element strides of [T, Hkv, D]
  void* cache;
  int64_t c_page, c_row, c_h;
  float* scale;
  int64_t s_page, s_row, s_h;  // per-token: [num_pages, page_size, Hkv]; per-head: s_h only
  KvScaleKind kind;
  int d;
};

__device__ float to_float(__half x) { return __half2float(x); }
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename T, bool kFp8>
__device__ void append_row(const CacheSide& c, int64_t t, int64_t h, int64_t page, int64_t row) {
  const int lane = threadIdx.x % 32;
  const T* src = static_cast<const T*>(c.src) + t * c.src_t + h * c.src_h;
  const int64_t dst = page * c.c_page + row * c.c_row + h * c.c_h;
  if constexpr (!kFp8) {
    T* out = static_cast<T*>(c.cache) + dst;
    for (int d = lane; d < c.d; d += 32) out[d] = src[d];
  } else {
    float* sp = c.scale;
    if (c.kind == KvScaleKind::kHead) sp += h * c.s_h;
    if (c.kind == KvScaleKind::kToken) {
      sp += page * c.s_page + row * c.s_row + h * c.s_h;
      float amax = 0.f;
      for (int d = lane; d < c.d; d += 32) amax = fmaxf(amax, fabsf(to_float(src[d])));
      amax = warp_max(amax);
      if (lane == 0) *sp = amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f;
      __syncwarp();
    }
    const float s = *sp;
    auto* out = static_cast<__nv_fp8_storage_t*>(c.cache) + dst;
    for (int d = lane; d < c.d; d += 32)
      out[d] = __nv_cvt_float_to_fp8(__fdiv_rn(to_float(src[d]), s), __NV_SATFINITE, __NV_E4M3);
  }
}

template <typename T, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32)
    append_kv_kernel(CacheSide k, CacheSide v, const int32_t* slots, int64_t slot_stride,
                     int64_t rows, int hkv, int64_t page_size, int64_t capacity) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int64_t t = r / hkv, h = r % hkv;
  const int64_t s = slots[t * slot_stride];
  if (s < 0 || s >= capacity) return;  // -1 is padding; other values were not validated
  append_row<T, kFp8>(k, t, h, s / page_size, s % page_size);
  if (v.src != nullptr) append_row<T, kFp8>(v, t, h, s / page_size, s % page_size);  // else K alone
}

CacheSide side(const TensorView& src, const TensorView& cache, const TensorView& scale,
               KvScaleKind kind) {
  CacheSide c{};
  c.src = src.data;
  c.src_t = src.stride[0];
  c.src_h = src.stride[1];
  c.cache = cache.data;
  c.c_page = cache.stride[0];
  c.c_row = cache.stride[1];
  c.c_h = cache.stride[2];
  c.scale = static_cast<float*>(scale.data);
  c.kind = kind;
  if (kind == KvScaleKind::kHead) c.s_h = scale.stride[0];
  if (kind == KvScaleKind::kToken) {
    c.s_page = scale.stride[0];
    c.s_row = scale.stride[1];
    c.s_h = scale.stride[2];
  }
  c.d = static_cast<int>(src.shape[2]);
  return c;
}

template <typename T>
Status launch(const AppendKvArgs& a, const AppendKvProblem& p, cudaStream_t stream) {
  const CacheSide k = side(a.k, a.k_cache, a.k_scale, p.k_scale);
  const CacheSide v = p.has_v ? side(a.v, a.v_cache, a.v_scale, p.v_scale) : CacheSide{};
  const int64_t rows = p.tokens * p.hkv;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  const auto* slots = static_cast<const int32_t*>(a.slot_mapping.data);
  const int hkv = static_cast<int>(p.hkv);
  if (p.fp8)
    append_kv_kernel<T, true><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(
        k, v, slots, a.slot_mapping.stride[0], rows, hkv, p.page_size, p.capacity());
  else
    append_kv_kernel<T, false><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(
        k, v, slots, a.slot_mapping.stride[0], rows, hkv, p.page_size, p.capacity());
  ATTNKIT_CUDA_CHECK_LAUNCH("append_kv_kernel");
  return Status::Ok();
}

}  // namespace

Status cuda_append_kv(const AppendKvArgs& a, const AppendKvProblem& p, const ExecOptions& opts) {
  if (p.tokens == 0) return Status::Ok();
  if (p.hkv > INT32_MAX || p.dk > INT32_MAX || p.dv > INT32_MAX ||
      (p.tokens * p.hkv + kWarps - 1) / kWarps > INT32_MAX)
    return Status::Unsupported("append_kv_cache: too many tokens or heads for one launch");
  DeviceGuard guard(p.device.index);
  if (!guard.ok()) return Status::Internal("append_kv_cache: cannot make the tensors' device current");
  const auto stream = static_cast<cudaStream_t>(opts.stream);
  return a.k.dtype == DType::kFloat16 ? launch<__half>(a, p, stream)
                                      : launch<__nv_bfloat16>(a, p, stream);
}

}  // namespace attnkit::detail
