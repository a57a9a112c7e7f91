// quantize_fp8: validate into a problem, then the CPU backend (src/cpu/quantize_cpu.cpp).
#include "attnkit/quantize.h"

#include <algorithm>
#include <string>

#include "api/check.h"
#include "api/quantize_problem.h"

namespace attnkit {
namespace detail {

Status validate_quantize_fp8(const QuantizeFp8Args& a, QuantizeProblem* p) {
  for (auto [t, n] : {std::pair{&a.x, "x"}, {&a.out, "out"}, {&a.scale, "scale"}})
    ATTNKIT_RETURN_IF_ERROR(require_defined(*t, n));
  const Device dev = a.x.device;
  ATTNKIT_RETURN_IF_ERROR(
      require_dtype(a.x, "x", {DType::kFloat32, DType::kFloat16, DType::kBFloat16}));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.out, "out", {DType::kFloat8E4M3}));
  for (auto [t, n] : {std::pair{&a.x, "x"}, {&a.out, "out"}}) {
    ATTNKIT_RETURN_IF_ERROR(require_valid_layout(*t, n));
    ATTNKIT_RETURN_IF_ERROR(require_last_dim_contiguous(*t, n));
    ATTNKIT_RETURN_IF_ERROR(require_same_device(*t, n, dev));
    ATTNKIT_RETURN_IF_ERROR(require_data(*t, n));
  }
  if (a.x.ndim < 2)
    return Status::Invalid("x must be [..., H, D], at least 2-D; it is " + shape_str(a.x));
  if (a.out.ndim != a.x.ndim ||
      !std::equal(a.x.shape.begin(), a.x.shape.begin() + a.x.ndim, a.out.shape.begin()))
    return Status::Invalid("out has shape " + shape_str(a.out) + ", which must be x's " +
                           shape_str(a.x));
  p->heads = a.x.size(-2);
  p->d = a.x.size(-1);
  p->rows = p->d > 0 ? a.x.numel() / p->d : 0;
  ATTNKIT_RETURN_IF_ERROR(
      kv_scale_kind(a.scale, "scale", a.x, p->heads, -1, 0, dev, &p->kind));
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart({{&a.out, "out"}, {&a.scale, "scale"}},
                                                {{&a.x, "x"}}));
  if (dev.type != DeviceType::kCPU)
    return Status::Unsupported("quantize_fp8 runs on the CPU backend only for now; x is on a "
                               "CUDA device");
  return Status::Ok();
}

}  // namespace detail

Status quantize_fp8(const QuantizeFp8Args& a, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    detail::QuantizeProblem p;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_quantize_fp8(a, &p));
    if (opts.backend != Backend::kAuto && opts.backend != Backend::kCPU)
      return Status::Invalid(std::string("quantize_fp8: backend ") + to_string(opts.backend) +
                             " needs tensors on a CUDA device, but they are on the cpu");
    return detail::cpu_quantize_fp8(a, p);
  });
}

}  // namespace attnkit
