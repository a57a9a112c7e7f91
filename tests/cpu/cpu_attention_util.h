// Running the CPU backend on a test case and checking it against the naive fp64 reference.
#pragma once

#include <gtest/gtest.h>

#include "attnkit/attention.h"
#include "common/attention_case.h"
#include "common/attention_check.h"

namespace attnkit::test {

// CPU backend vs naive fp64. Both accumulate in at least fp32 from the same rounded inputs, so for
// fp32 outputs only fp32 arithmetic error separates them; bf16/fp16 outputs add one rounding of O
// (half an ulp: 2^-9 relative for bf16, 2^-12 for fp16).
inline testkit::Tolerance cpu_o_tolerance(DType dt) {
  switch (dt) {
    case DType::kFloat32: return {1e-5, 1e-5};
    case DType::kFloat16: return testkit::kAttnFp16;
    default: return testkit::kAttnBf16;
  }
}
// LSE is fp32 in every case; its error grows with its magnitude (large logits), hence relative.
inline testkit::Tolerance cpu_lse_tolerance() { return {1e-6, 1e-4}; }

inline ExecOptions cpu_opts(int threads = 2) {
  ExecOptions o;
  o.backend = Backend::kCPU;
  o.cpu_threads = threads;
  return o;
}

// Builds the case, runs the CPU backend and compares O and LSE with the naive reference.
inline void expect_cpu_matches_naive(const AttnCase& c) {
  SCOPED_TRACE(c.str());
  AttnData d = make_attn_data(c);
  const Status st = attention_forward(d.args(), cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();
  expect_matches(d, naive_reference(d), cpu_o_tolerance(c.dtype), cpu_lse_tolerance());
}

}  // namespace attnkit::test
