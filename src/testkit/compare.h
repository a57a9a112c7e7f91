// Error metrics for comparing a result with a reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnkit::testkit {

struct ErrorStats {
  double rel_l2 = 0;    // ||out - ref|| / ||ref|| over finite reference entries
  double max_abs = 0;   // max |out - ref|
  int64_t nan_count = 0;       // NaN in out (never allowed)
  int64_t mismatched_inf = 0;  // out and ref disagree on an infinity (e.g. LSE = -inf)
  int64_t count = 0;
  std::string str() const;
};

ErrorStats compare(const std::vector<float>& out, const std::vector<float>& ref);

// Tolerances from docs/design.md.
struct Tolerance {
  double rel_l2;
  double max_abs;
};
inline constexpr Tolerance kAttnBf16{5e-3, 3e-2};
inline constexpr Tolerance kAttnFp16{2e-3, 1e-2};
// LSE: 1e-3 absolute (docs/design.md); the rel-L2 term only guards against a wholesale offset.
inline constexpr Tolerance kLse{1e-4, 1e-3};
inline constexpr Tolerance kGdn{1e-2, 1e-1};

bool within(const ErrorStats& e, const Tolerance& tol);

}  // namespace attnkit::testkit
