#include "api/kv_scale.h"

#include <string>

#include "api/check.h"

namespace attnkit::detail {

Status kv_scale_kind(const TensorView& s, const char* name, const TensorView& t, int64_t heads,
                     int64_t batch, int64_t kv_heads, const Device& dev, KvScaleKind* kind) {
  if (!s.defined())
    return Status::Invalid(std::string(name) + " is required with an fp8e4m3 tensor");
  ATTNKIT_RETURN_IF_ERROR(require_dtype(s, name, {DType::kFloat32}));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(s, name));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(s, name, dev));
  ATTNKIT_RETURN_IF_ERROR(require_data(s, name));
  bool per_token = s.ndim == t.ndim - 1 && s.ndim > 1;
  for (int d = 0; per_token && d < s.ndim; ++d) per_token = s.shape[d] == t.shape[d];
  if (per_token) {
    *kind = KvScaleKind::kToken;
  } else if (s.ndim == 1 && s.shape[0] == 1) {
    *kind = KvScaleKind::kTensor;
  } else if (s.ndim == 1 && s.shape[0] == heads) {
    *kind = KvScaleKind::kHead;
  } else if (batch >= 0 && s.ndim == 2 && s.shape[0] == batch && s.shape[1] == kv_heads) {
    *kind = KvScaleKind::kBatchHead;
  } else {
    return Status::Invalid(std::string(name) + " has shape " + shape_str(s) + ", expected [1], [" +
                           std::to_string(heads) + "] (per head), " + shape_str(t) +
                           " without its last dimension (per token)" +
                           (batch >= 0 ? " or [" + std::to_string(batch) + ", " +
                                             std::to_string(kv_heads) + "] (per sequence and KV head)"
                                       : std::string()));
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
