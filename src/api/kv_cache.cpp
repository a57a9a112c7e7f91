// append_kv_cache: validate, pick the backend of the tensors' device, run.
#include "attnkit/kv_cache.h"

#include <string>

#include "api/kv_cache_backends.h"
#include "api/check.h"

namespace attnkit {

Status append_kv_cache(const AppendKvArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    detail::AppendKvProblem p;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_append_kv(args, opts, &p));
    const bool host = p.device.type == DeviceType::kCPU;
    if (host && opts.backend != Backend::kAuto && opts.backend != Backend::kCPU)
      return Status::Invalid(std::string("append_kv_cache: backend ") + to_string(opts.backend) +
                             " needs tensors on a CUDA device, but they are on the cpu");
    if (!host && opts.backend == Backend::kCPU)
      return Status::Invalid("append_kv_cache: backend cpu needs host tensors, but they are on a "
                             "CUDA device");
    if (host) return detail::cpu_append_kv(args, p, opts);
  #ifdef ATTNKIT_WITH_CUDA
    return detail::cuda_append_kv(args, p, opts);
  #else
    return Status::Unsupported("append_kv_cache: this attnkit build has no CUDA support; tensors "
                               "must be on the CPU");
  #endif
  });
}

}  // namespace attnkit
