// The CPU backend of quantize_fp8: one pass for the group maxima, one for the scales and codes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "api/quantize_problem.h"
#include "cpu/half.h"

namespace attnkit::detail {
namespace {

// Element offset of row r (of rows of d elements, in x's logical order) in tensor t.
int64_t row_offset(const TensorView& t, int64_t r) {
  int64_t off = 0;
  for (int dim = t.ndim - 2; dim >= 0; --dim) {
    off += (r % t.shape[dim]) * t.stride[dim];
    r /= t.shape[dim];
  }
  return off;
}

// scale's element for row r (its head is r % heads).
int64_t scale_offset(const TensorView& s, KvScaleKind kind, int64_t r, int64_t heads) {
  if (kind == KvScaleKind::kHead) return (r % heads) * s.stride[0];
  if (kind == KvScaleKind::kToken) {
    int64_t off = 0;
    for (int dim = s.ndim - 1; dim >= 0; --dim) {
      off += (r % s.shape[dim]) * s.stride[dim];
      r /= s.shape[dim];
    }
    return off;
  }
  return 0;
}

}  // namespace

Status cpu_quantize_fp8(const QuantizeFp8Args& a, const QuantizeProblem& p) {
  // Group maxima, then the scales, then the codes.
  const int64_t groups = p.kind == KvScaleKind::kTensor ? 1
                         : p.kind == KvScaleKind::kHead ? p.heads
                                                        : p.rows;
  auto group_of = [&](int64_t r) {
    return p.kind == KvScaleKind::kTensor ? 0 : p.kind == KvScaleKind::kHead ? r % p.heads : r;
  };
  std::vector<float> amax(static_cast<size_t>(groups), 0.f);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t base = row_offset(a.x, r);
    float& m = amax[static_cast<size_t>(group_of(r))];
    for (int64_t i = 0; i < p.d; ++i) m = std::max(m, std::fabs(ref::load_float(a.x, base + i)));
  }
  float* scale = static_cast<float*>(a.scale.data);
  for (int64_t r = 0; r < p.rows; ++r) {
    const float m = amax[static_cast<size_t>(group_of(r))];
    const float s = m > 0.f ? m / detail::kE4m3Max : 1.f;
    scale[scale_offset(a.scale, p.kind, r, p.heads)] = s;
    const int64_t in = row_offset(a.x, r), out = row_offset(a.out, r);
    for (int64_t i = 0; i < p.d; ++i)
      ref::store_float(a.out, out + i, ref::load_float(a.x, in + i) / s);
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
