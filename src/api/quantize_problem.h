// quantize_fp8's validated problem and its CPU backend (include/attnkit/quantize.h).
#pragma once

#include "api/kv_scale.h"
#include "attnkit/quantize.h"

namespace attnkit::detail {

// x as rows of d elements; row r's head is r % heads; the scale kind picks the groups.
struct QuantizeProblem {
  KvScaleKind kind = KvScaleKind::kNone;
  int64_t rows = 0, heads = 0, d = 0;
};

Status validate_quantize_fp8(const QuantizeFp8Args& args, QuantizeProblem* p);
Status cpu_quantize_fp8(const QuantizeFp8Args& args, const QuantizeProblem& p);

}  // namespace attnkit::detail
