// The CPU reference of append_kv_cache (include/attnkit/kv_cache.h): one row (token, KV head) at a
// time, converted through fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "api/kv_cache_backends.h"
#include "cpu/half.h"

namespace attnkit::detail {
namespace {

// Element offset of scale s for slot (page, row), KV head h.
int64_t scale_offset(const TensorView& s, KvScaleKind kind, int64_t page, int64_t row, int64_t h) {
  switch (kind) {
    case KvScaleKind::kTensor: return 0;
    case KvScaleKind::kHead: return h * s.stride[0];
    case KvScaleKind::kToken: return page * s.stride[0] + row * s.stride[1] + h * s.stride[2];
    case KvScaleKind::kNone: break;
  }
  return 0;
}

// Writes row x (d values) of one (token, head) into cache slot (page, row, h).
void store_row(const TensorView& cache, const TensorView& scale, KvScaleKind kind, int64_t page,
               int64_t row, int64_t h, std::vector<float>& x) {
  const int64_t base = page * cache.stride[0] + row * cache.stride[1] + h * cache.stride[2];
  if (kind != KvScaleKind::kNone) {
    const int64_t so = scale_offset(scale, kind, page, row, h);
    float* sp = static_cast<float*>(scale.data) + so;
    if (kind == KvScaleKind::kToken) {
      float amax = 0.f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      *sp = amax > 0.f ? amax / kE4m3Max : 1.f;
    }
    const float s = *sp;
    for (float& v : x) v = v / s;
  }
  for (size_t d = 0; d < x.size(); ++d) ref::store_float(cache, base + static_cast<int64_t>(d), x[d]);
}

void append_one(const TensorView& src, const TensorView& cache, const TensorView& scale,
                KvScaleKind kind, int64_t t, int64_t h, int64_t page, int64_t row,
                std::vector<float>& x) {
  const int64_t off = t * src.stride[0] + h * src.stride[1];
  for (size_t d = 0; d < x.size(); ++d) x[d] = ref::load_float(src, off + static_cast<int64_t>(d));
  store_row(cache, scale, kind, page, row, h, x);
}

}  // namespace

Status cpu_append_kv(const AppendKvArgs& a, const AppendKvProblem& p, const ExecOptions&) {
  std::vector<float> xk(static_cast<size_t>(p.dk)), xv(static_cast<size_t>(p.dv));
  for (int64_t t = 0; t < p.tokens; ++t) {
    const int32_t s = p.slots[t];
    if (s < 0) continue;
    const int64_t page = s / p.page_size, row = s % p.page_size;
    for (int64_t h = 0; h < p.hkv; ++h) {
      append_one(a.k, a.k_cache, a.k_scale, p.k_scale, t, h, page, row, xk);
      if (p.has_v) append_one(a.v, a.v_cache, a.v_scale, p.v_scale, t, h, page, row, xv);
    }
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
