// Helpers shared by the sm90 prefill tests: the Hopper check that skips them elsewhere, the
// options that force the sm90 backend, and the base case they vary.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_attention_util.h"

namespace attnkit::test {

inline bool on_hopper() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    return false;
  return major == 9;
}

#define SKIP_UNLESS_HOPPER() \
  if (!::attnkit::test::on_hopper()) GTEST_SKIP() << "the sm90 kernels need a Hopper GPU"

inline ExecOptions sm90_opts() {
  ExecOptions o;
  o.backend = Backend::kCudaSm90;
  return o;
}

// bf16 (AttnCase's default), 4 query heads over 2 KV heads, head dim 128.
inline AttnCase sm90_base(int batch, int sq, int sk, uint64_t seed) {
  return gqa_case(batch, sq, sk, seed);
}

}  // namespace attnkit::test
