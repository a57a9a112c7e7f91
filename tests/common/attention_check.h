// Comparing attention outputs with the naive fp64 reference (testkit/naive.h), as gtest assertions.
// Device-agnostic: the reference is computed from the host copy of a case's inputs; outputs are
// read back with read_back (which copies device buffers to the host).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/attention_case.h"
#include "testkit/compare.h"
#include "testkit/naive.h"

namespace attnkit::test {

struct Reference {
  std::vector<float> o, lse;
};

// The naive fp64 reference for a case built by make_attn_data (host buffers).
inline Reference naive_reference(const AttnData& host) {
  std::vector<double> o, lse;
  const Status st = testkit::naive_attention(host.args(), &o, &lse);
  EXPECT_TRUE(st.ok()) << st.message();
  return {std::vector<float>(o.begin(), o.end()), std::vector<float>(lse.begin(), lse.end())};
}

// out ~ ref within tol; NaN (e.g. poison that survived), infinities that disagree and a size
// mismatch all fail.
inline ::testing::AssertionResult close_to(const std::vector<float>& out,
                                           const std::vector<float>& ref,
                                           const testkit::Tolerance& tol, const char* what) {
  const testkit::ErrorStats e = testkit::compare(out, ref);
  if (testkit::within(e, tol)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << e.str() << " (allowed rel_l2 "
                                       << tol.rel_l2 << ", max_abs " << tol.max_abs << ")";
}

// O and LSE of a finished run (any device) against the reference.
inline void expect_matches(const AttnData& run, const Reference& ref, const testkit::Tolerance& o_tol,
                           const testkit::Tolerance& lse_tol) {
  EXPECT_TRUE(close_to(read_back(run.o), ref.o, o_tol, "O")) << run.c.str();
  if (run.c.lse) EXPECT_TRUE(close_to(read_back(run.lse), ref.lse, lse_tol, "LSE")) << run.c.str();
}

}  // namespace attnkit::test
