// How many CTAs of one kernel fit on the current device at once (SM count x blocks per SM), for
// persistent grids. Host-only; found once per device and kernel and cached, since the queries
// cost host time on every launch otherwise (the decode step runs once per generated token).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "attnkit/status.h"
#include "cuda/common/cuda_check.h"

namespace attnkit::detail {

// *ctas = resident CTAs of kKernel launched with `threads` threads and `smem` bytes of dynamic
// shared memory; Internal if not one fits an SM.
template <auto kKernel>
Status resident_ctas(int threads, int smem, int* ctas) {
  static std::atomic<int> fill[64] = {};  // per device index, 0 = not known yet
  int dev = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&dev));
  int n = dev < 64 ? fill[dev].load(std::memory_order_relaxed) : 0;
  if (n == 0) {
    int sms = 0, per_sm = 0;
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ATTNKIT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem));
    if (per_sm < 1) return Status::Internal("a persistent kernel does not fit an SM");
    n = sms * per_sm;
    if (dev < 64) fill[dev].store(n, std::memory_order_relaxed);
  }
  *ctas = n;
  return Status::Ok();
}

}  // namespace attnkit::detail
