// Argument validation for append_kv_cache. Runs before any data is touched; every error names the
// argument at fault.
#include <algorithm>
#include <string>

#include "api/check.h"
#include "api/kv_cache_problem.h"

namespace attnkit::detail {
namespace {

Status check_array(const TensorView& t, const char* name, const Device& dev, int rank) {
  ATTNKIT_RETURN_IF_ERROR(require_rank(t, name, rank));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(t, name, dev));
  return require_data(t, name);
}

}  // namespace

Status validate_append_kv(const AppendKvArgs& a, const ExecOptions& opts, AppendKvProblem* p) {
  *p = AppendKvProblem{};
  // K alone (an MLA latent cache, read as both K and V) when neither v nor v_cache is given.
  p->has_v = a.v.defined() || a.v_cache.defined();
  for (auto [t, n] : {std::pair{&a.k, "k"}, {&a.slot_mapping, "slot_mapping"},
                      {&a.k_cache, "k_cache"}})
    ATTNKIT_RETURN_IF_ERROR(require_defined(*t, n));
  if (p->has_v) {
    ATTNKIT_RETURN_IF_ERROR(require_defined(a.v, "v (given v_cache)"));
    ATTNKIT_RETURN_IF_ERROR(require_defined(a.v_cache, "v_cache (given v)"));
  } else if (a.v_scale.defined()) {
    return Status::Invalid("v_scale is given without v and v_cache");
  }
  const Device dev = a.k.device;
  p->device = dev;

  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.k, "k", {DType::kBFloat16, DType::kFloat16}));
  if (p->has_v) ATTNKIT_RETURN_IF_ERROR(require_dtype(a.v, "v", {a.k.dtype}));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.k_cache, "k_cache", {a.k.dtype, DType::kFloat8E4M3}));
  if (p->has_v) ATTNKIT_RETURN_IF_ERROR(require_dtype(a.v_cache, "v_cache", {a.k_cache.dtype}));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.slot_mapping, "slot_mapping", {DType::kInt32}));
  for (auto [t, n] :
       {std::pair{&a.k, "k"}, {&a.v, "v"}, {&a.k_cache, "k_cache"}, {&a.v_cache, "v_cache"}}) {
    if (!t->defined()) continue;  // v and v_cache of a K-alone call
    ATTNKIT_RETURN_IF_ERROR(check_array(*t, n, dev, t == &a.k || t == &a.v ? 3 : 4));
    ATTNKIT_RETURN_IF_ERROR(require_last_dim_contiguous(*t, n));
  }
  ATTNKIT_RETURN_IF_ERROR(check_array(a.slot_mapping, "slot_mapping", dev, 1));

  p->tokens = a.k.shape[0];
  p->hkv = a.k.shape[1];
  p->dk = a.k.shape[2];
  p->dv = p->has_v ? a.v.shape[2] : 0;
  p->num_pages = a.k_cache.shape[0];
  p->page_size = a.k_cache.shape[1];
  ATTNKIT_RETURN_IF_ERROR(require_shape(a.slot_mapping, "slot_mapping", {p->tokens}));
  ATTNKIT_RETURN_IF_ERROR(require_shape(a.k_cache, "k_cache", {-1, -1, p->hkv, p->dk}));
  if (p->has_v) {
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.v, "v", {p->tokens, p->hkv, -1}));
    ATTNKIT_RETURN_IF_ERROR(
        require_shape(a.v_cache, "v_cache", {p->num_pages, p->page_size, p->hkv, p->dv}));
  }
  if (p->hkv < 1 || p->dk < 1 || (p->has_v && p->dv < 1) || p->page_size < 1)
    return Status::Invalid("append_kv_cache: heads, head dims and page_size must be at least 1 (k " +
                           a.k.describe() + ", k_cache " + a.k_cache.describe() + ")");

  p->fp8 = a.k_cache.dtype == DType::kFloat8E4M3;
  if (p->fp8) {
    ATTNKIT_RETURN_IF_ERROR(kv_scale_kind(a.k_scale, "k_scale", a.k_cache, p->hkv, -1, 0, dev, &p->k_scale));
    if (p->has_v)
      ATTNKIT_RETURN_IF_ERROR(
          kv_scale_kind(a.v_scale, "v_scale", a.v_cache, p->hkv, -1, 0, dev, &p->v_scale));
  } else if (a.k_scale.defined() || a.v_scale.defined()) {
    return Status::Invalid("k_scale / v_scale are for fp8e4m3 caches; k_cache is " +
                           std::string(to_string(a.k_cache.dtype)));
  }

  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart(
      {{&a.k_cache, "k_cache"}, {&a.v_cache, "v_cache"}},
      {{&a.k, "k"}, {&a.v, "v"}, {&a.slot_mapping, "slot_mapping"}, {&a.k_scale, "k_scale"},
       {&a.v_scale, "v_scale"}}));

  p->slots_on_host = dev.type == DeviceType::kCPU || opts.validate_device_indices;
  if (p->slots_on_host) {
    ATTNKIT_RETURN_IF_ERROR(read_int32(a.slot_mapping, "slot_mapping", opts.stream, &p->slots));
    std::vector<int32_t> filled;
    filled.reserve(p->slots.size());
    for (int64_t t = 0; t < p->tokens; ++t) {
      const int32_t s = p->slots[t];
      if (s == -1) continue;
      if (s < 0 || s >= p->capacity())
        return Status::Invalid("slot_mapping[" + std::to_string(t) + "] = " + std::to_string(s) +
                               " is outside the cache's " + std::to_string(p->capacity()) +
                               " slots (and is not -1)");
      filled.push_back(s);
    }
    std::sort(filled.begin(), filled.end());
    const auto dup = std::adjacent_find(filled.begin(), filled.end());
    if (dup != filled.end())
      return Status::Invalid("slot_mapping gives slot " + std::to_string(*dup) + " to two tokens");
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
