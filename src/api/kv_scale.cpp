#include "api/kv_scale.h"

#include <string>

#include "api/check.h"

namespace attnkit::detail {

Status kv_scale_kind(const TensorView& s, const char* name, const TensorView& cache, int64_t hkv,
                     const Device& dev, KvScaleKind* kind) {
  if (!s.defined())
    return Status::Invalid(std::string(name) + " is required with an fp8e4m3 cache");
  ATTNKIT_RETURN_IF_ERROR(require_dtype(s, name, {DType::kFloat32}));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(s, name));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(s, name, dev));
  ATTNKIT_RETURN_IF_ERROR(require_data(s, name));
  if (s.ndim == cache.ndim - 1 && s.ndim > 1) {
    for (int d = 0; d < s.ndim; ++d)
      if (s.shape[d] != cache.shape[d])
        return Status::Invalid(std::string(name) + " has shape " + shape_str(s) +
                               "; a per-token scale is shaped like the cache " + shape_str(cache) +
                               " without its last dimension");
    *kind = KvScaleKind::kToken;
  } else if (s.ndim == 1 && s.shape[0] == 1) {
    *kind = KvScaleKind::kTensor;
  } else if (s.ndim == 1 && s.shape[0] == hkv) {
    *kind = KvScaleKind::kHead;
  } else {
    return Status::Invalid(std::string(name) + " has shape " + shape_str(s) + ", expected [1], [" +
                           std::to_string(hkv) + "] (per KV head) or the cache's shape " +
                           shape_str(cache) + " without its last dimension (per token)");
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
