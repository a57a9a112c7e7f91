// Division by a run-time constant without the integer divide (page size, GQA group): a multiply-high
// and a shift (Granlund–Montgomery, round-up variant), exact for 0 <= n < 2^31.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ATTNKIT_HD __host__ __device__ __forceinline__
#else
#define ATTNKIT_HD inline
#endif

namespace attnkit::gpu {

struct FastDiv {
  int32_t d = 1;
  uint32_t mul = 0;
  uint32_t shift = 0;

  FastDiv() = default;
  explicit FastDiv(int32_t divisor) : d(divisor) {
    // shift = ceil(log2(d)); mul = floor(2^32 * (2^shift - d) / d) + 1
    uint32_t s = 0;
    while ((1u << s) < static_cast<uint32_t>(d)) ++s;
    shift = s;
    const uint64_t one = 1;
    mul = static_cast<uint32_t>(((one << 32) * ((one << s) - d)) / d + 1);
  }

  ATTNKIT_HD int32_t div(int32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(static_cast<uint32_t>(n), mul);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * mul) >> 32);
#endif
    return static_cast<int32_t>((hi + static_cast<uint32_t>(n)) >> shift);
  }
  ATTNKIT_HD void divmod(int32_t n, int32_t& q, int32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
};

}  // namespace attnkit::gpu
