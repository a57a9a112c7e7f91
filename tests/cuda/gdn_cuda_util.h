// Helpers for the Gated DeltaNet GPU tests: random inputs shaped like real ones, host/device
// copies, and a comparison that also proves every output element was written.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "api/gdn_backends.h"
#include "attnkit/gdn.h"
#include "testkit/buffer.h"
#include "testkit/compare.h"

namespace attnkit::gdn_test {

using testkit::Buffer;
using detail::GdnKernels;

// The public calls with their kernels chosen by `kernels` rather than by the library.
inline Status chunk_forward_with(const GdnChunkArgs& a, const GdnKernels& kernels,
                                 const ExecOptions& opts = {}) {
  return detail::gdn_chunk_forward_with(a, opts, kernels);
}
inline Status chunk_output_with(const GdnOutputArgs& a, const GdnKernels& kernels,
                                const ExecOptions& opts = {}) {
  return detail::gdn_chunk_output_with(a, opts, kernels);
}
inline Status decode_step_with(const GdnDecodeArgs& a, const GdnKernels& kernels,
                               const ExecOptions& opts = {}) {
  return detail::gdn_decode_step_with(a, opts, kernels);
}

// A kernel choice and its name for test traces.
struct NamedKernels {
  const char* name;
  GdnKernels kernels;
};
inline GdnKernels mma_sync_kernels() {
  GdnKernels k;
  k.mma_sync = true;
  return k;
}

inline Buffer dev(const Buffer& b) { return b.to(cuda(0)); }

// Uniform gates in log space, [lo, hi] (<= 0).
inline Buffer random_gates(std::vector<int64_t> shape, std::mt19937_64& rng, float lo, float hi) {
  Buffer b(DType::kFloat32, std::move(shape));
  testkit::fill_uniform(b, rng, lo, hi);
  return b;
}

// Rows of `d` elements scaled to unit norm, as the stage ops expect already-normalised q/k.
inline Buffer unit_rows(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng) {
  Buffer b(dt, shape);
  const int64_t d = shape.back();
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(b.numel()));
  for (size_t r = 0; r < v.size(); r += d) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) {
      v[r + i] = nd(rng);
      ss += double(v[r + i]) * v[r + i];
    }
    for (int64_t i = 0; i < d; ++i) v[r + i] = static_cast<float>(v[r + i] / std::sqrt(ss));
  }
  b.from_float(v);
  return b;
}

inline Buffer poisoned(DType dt, std::vector<int64_t> shape) {
  Buffer b(dt, std::move(shape), cuda(0));
  b.poison();
  return b;
}

// GPU result vs CPU reference at the docs/design.md tolerance; NaN (an unwritten poisoned element)
// fails.
inline void expect_close(const Buffer& gpu, const Buffer& ref, const char* what,
                         testkit::Tolerance tol = testkit::kGdn) {
  const auto e = testkit::compare(gpu.to_float(), ref.to_float());
  std::printf("    %-12s %s\n", what, e.str().c_str());
  EXPECT_TRUE(testkit::within(e, tol)) << what << ": " << e.str();
  EXPECT_EQ(e.nan_count, 0) << what << " has unwritten (NaN) elements";
}

inline Buffer cu_buffer(const std::vector<int32_t>& cu) {
  Buffer b(DType::kInt32, {static_cast<int64_t>(cu.size())});
  b.from_int(cu);
  return b;
}

inline int64_t count_chunks(int64_t B, int64_t T, const std::vector<int32_t>& cu) {
  if (cu.empty()) return B * ((T + 63) / 64);
  int64_t c = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) c += (cu[i + 1] - cu[i] + 63) / 64;
  return c;
}

}  // namespace attnkit::gdn_test
