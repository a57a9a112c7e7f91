#include "gpu.h"

#include <cstring>

#ifdef ATTNKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/cuda_check.h"
#endif

namespace attnkit::cli::gpu {

#ifdef ATTNKIT_WITH_CUDA
namespace {
Status check(cudaError_t e, const char* what) { return detail::cuda_status(e, what, __FILE__, __LINE__); }
}  // namespace

bool device_facts(DeviceFacts* f, std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    if (why) *why = "cudaGetDeviceProperties failed";
    return false;
  }
  f->name = p.name;
  f->cc_major = p.major;
  f->cc_minor = p.minor;
  f->sm_count = p.multiProcessorCount;
  f->l2_bytes = p.l2CacheSize;
  f->memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  cudaDriverGetVersion(&f->driver_version);
  cudaRuntimeGetVersion(&f->runtime_version);
  return true;
}

Status copy_from_host(void* dst, const void* src, size_t bytes) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

Status synchronize() { return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

bool context_usable() {
  cudaGetLastError();  // clears non-sticky errors; a sticky one is returned again below
  void* p = nullptr;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMalloc(&p, 256) != cudaSuccess) return false;
  return cudaFree(p) == cudaSuccess;
}

#else  // CPU-only build

bool device_facts(DeviceFacts*, std::string* why) {
  if (why) *why = "this attnkit build has no CUDA support";
  return false;
}

Status copy_from_host(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::Ok();
}

Status synchronize() { return Status::Ok(); }

bool context_usable() { return true; }

#endif

}  // namespace attnkit::cli::gpu
