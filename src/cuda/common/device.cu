// Device facts and the host copy the API layer needs for validating device-side index tensors.
#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "api/backends.h"
#include "api/device_copy.h"
#include "cuda/common/cuda_check.h"

namespace attnkit::detail {

Status cuda_device_info(int device, CudaDeviceInfo* info) {
  // Cached per device: cudaGetDeviceProperties is slow, and plans are made often.
  static std::mutex mu;
  static std::vector<std::pair<bool, CudaDeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0) return Status::Invalid("CUDA device index must be >= 0");
  if (static_cast<size_t>(device) < cache.size() && cache[device].first) {
    *info = cache[device].second;
    return Status::Ok();
  }
  int count = 0;
  ATTNKIT_CUDA_TRY(cudaGetDeviceCount(&count));
  if (device >= count)
    return Status::Invalid("tensors are on cuda:" + std::to_string(device) + " but only " +
                           std::to_string(count) + " CUDA devices exist");
  CudaDeviceInfo d;
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, device));
  int l2 = 0;
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  d.l2_bytes = l2;
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&d.smem_per_block_optin,
                                          cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (cache.size() <= static_cast<size_t>(device)) cache.resize(device + 1);
  cache[device] = {true, d};
  *info = d;
  return Status::Ok();
}

Status copy_device_to_host(void* dst, const void* src, size_t bytes, int device, void* stream) {
  int prev = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&prev));
  ATTNKIT_CUDA_TRY(cudaSetDevice(device));
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  cudaSetDevice(prev);
  ATTNKIT_CUDA_TRY(err);
  return Status::Ok();
}

}  // namespace attnkit::detail
