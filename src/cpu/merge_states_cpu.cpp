// CPU merge_states: LSE = log(sum_n exp(LSE_n)), O = sum_n exp(LSE_n - LSE) O_n, in fp32, one
// (token, head) row at a time, threads over blocks of rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "api/backends.h"
#include "cpu/half.h"
#include "cpu/parallel.h"

namespace attnkit::detail {
namespace {

constexpr int64_t kRowsPerItem = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void merge_row(const MergeStatesArgs& a, const MergeProblem& p, int64_t t, int64_t h,
               std::vector<float>& acc) {
  const float* lse_parts = static_cast<const float*>(a.lse_parts.data);
  auto lse_at = [&](int64_t n) {
    return lse_parts[n * a.lse_parts.stride[0] + t * a.lse_parts.stride[1] + h * a.lse_parts.stride[2]];
  };
  float m = kNegInf;
  for (int64_t n = 0; n < p.n; ++n) m = std::max(m, lse_at(n));
  std::fill(acc.begin(), acc.end(), 0.f);
  float lse = kNegInf;
  if (m > kNegInf) {
    float total = 0.f;
    for (int64_t n = 0; n < p.n; ++n) total += std::exp(lse_at(n) - m);
    lse = m + std::log(total);
    const float inv_total = 1.f / total;
    for (int64_t n = 0; n < p.n; ++n) {
      const float l = lse_at(n);
      if (l == kNegInf) continue;  // an empty state's O is never read: it may hold anything
      // exp(l - m) / total rather than exp(l - lse): l - m is exact, whereas lse carries the
      // rounding of its magnitude (large LSEs would cost their ulp in every weight).
      const float w = std::exp(l - m) * inv_total;
      const int64_t base = n * a.o_parts.stride[0] + t * a.o_parts.stride[1] + h * a.o_parts.stride[2];
      for (int64_t d = 0; d < p.d; ++d) acc[d] += w * ref::load_float(a.o_parts, base + d);
    }
  }
  const int64_t o_off = t * a.o.stride[0] + h * a.o.stride[1];
  for (int64_t d = 0; d < p.d; ++d) ref::store_float(a.o, o_off + d, acc[d]);
  if (a.lse.defined())
    static_cast<float*>(a.lse.data)[t * a.lse.stride[0] + h * a.lse.stride[1]] = lse;
}

}  // namespace

Status cpu_merge_states(const MergeStatesArgs& args, const MergeProblem& prob,
                        const ExecOptions& opts) {
  const int64_t rows = prob.t * prob.h;
  const int64_t items = (rows + kRowsPerItem - 1) / kRowsPerItem;
  ref::parallel_for(items, opts.cpu_threads, [&](int64_t it) {
    std::vector<float> acc(static_cast<size_t>(prob.d));
    const int64_t end = std::min(rows, (it + 1) * kRowsPerItem);
    for (int64_t r = it * kRowsPerItem; r < end; ++r) merge_row(args, prob, r / prob.h, r % prob.h, acc);
  });
  return Status::Ok();
}

}  // namespace attnkit::detail
