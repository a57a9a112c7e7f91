// Quantising to FP8 (e4m3): quantize_fp8, so that a caller goes from fp16 / bf16 tensors to FP8
// attention (attention.h) without writing a kernel.
#pragma once

#include "attnkit/options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

// out = e4m3(x / scale), rounded to nearest even and saturated to +-448, with one fp32 scale per
// group of x's elements, scale = max |x| over the group / 448 (1 for an all-zero group), so that
// scale * out approximates x and the group's largest magnitude maps onto e4m3's largest value.
// The shape of `scale` picks the groups, as attention_forward reads them:
//   [1]                                   the whole tensor;
//   [H]                                   each head (x's second-to-last dimension);
//   x's shape without its last dimension  each (token, head) row.
// x is [..., H, D] (at least 2-D), fp32 / fp16 / bf16, any strides with a contiguous last
// dimension; out is e4m3 of x's shape. Outputs share no memory with x or each other (attention.h).
// CPU only for now: CUDA tensors are refused.
struct QuantizeFp8Args {
  TensorView x;
  TensorView out;    // fp8e4m3, x's shape
  TensorView scale;  // fp32: written
};

Status quantize_fp8(const QuantizeFp8Args& args, const ExecOptions& opts = {});

}  // namespace attnkit
