#include "testkit/compare.h"

#include <cmath>
#include <sstream>

namespace attnkit::testkit {

ErrorStats compare(const std::vector<float>& out, const std::vector<float>& ref) {
  ErrorStats e;
  e.count = static_cast<int64_t>(out.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double o = out[i], r = ref[i];
    if (std::isnan(o)) {
      ++e.nan_count;
      continue;
    }
    if (std::isinf(r) || std::isinf(o)) {
      if (o != r) ++e.mismatched_inf;
      continue;
    }
    num += (o - r) * (o - r);
    den += r * r;
    e.max_abs = std::max(e.max_abs, std::fabs(o - r));
  }
  if (out.size() != ref.size()) e.nan_count += 1;  // a size mismatch must never pass
  e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

std::string ErrorStats::str() const {
  std::ostringstream os;
  os << "rel_l2=" << rel_l2 << " max_abs=" << max_abs << " nan=" << nan_count
     << " inf_mismatch=" << mismatched_inf << " n=" << count;
  return os.str();
}

bool within(const ErrorStats& e, const Tolerance& tol) {
  return e.nan_count == 0 && e.mismatched_inf == 0 && e.rel_l2 <= tol.rel_l2 &&
         e.max_abs <= tol.max_abs;
}

}  // namespace attnkit::testkit
