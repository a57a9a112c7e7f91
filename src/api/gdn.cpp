// Gated DeltaNet entry points: validate, pick a backend, run. One dispatch_* function per op: host
// tensors go to the CPU reference; CUDA tensors go to a CUDA kernel once one is declared in
// api/gdn_backends.h (add the call in the op's dispatch_* function).
#include "attnkit/gdn.h"

#include <string>

#include "api/gdn_backends.h"
#include "api/check.h"

namespace attnkit {
namespace {

using detail::GdnDecodeProblem;
using detail::GdnProblem;

// Whether the CPU reference may run this request: the tensors are on the host and no CUDA backend
// was forced. Returns an error for a forced backend that cannot serve the tensors' device.
Status route_cpu(const Device& dev, const ExecOptions& opts, const char* op, bool* use_cpu) {
  *use_cpu = dev.type == DeviceType::kCPU;
  if (*use_cpu && opts.backend != Backend::kAuto && opts.backend != Backend::kCPU)
    return Status::Invalid(std::string(op) + ": backend " + to_string(opts.backend) +
                           " needs tensors on a CUDA device, but they are on the cpu");
  if (!*use_cpu && opts.backend == Backend::kCPU)
    return Status::Invalid(std::string(op) +
                           ": backend cpu needs host tensors, but they are on a CUDA device");
  return Status::Ok();
}

#ifndef ATTNKIT_WITH_CUDA
Status no_cuda_kernel(const char* op) {
  return Status::Unsupported(std::string(op) +
                             ": this attnkit build has no CUDA support; tensors must be on the CPU");
}
#endif

Status dispatch_cumsum(const GdnCumsumArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_chunk_cumsum", &cpu));
  if (cpu) return detail::cpu_gdn_chunk_cumsum(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_chunk_cumsum(a, p, opts);
#else
  return no_cuda_kernel("gdn_chunk_cumsum");
#endif
}

Status dispatch_kkt_inverse(const GdnKktInverseArgs& a, const GdnProblem& p,
                            const ExecOptions& opts) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_kkt_inverse", &cpu));
  if (cpu) return detail::cpu_gdn_kkt_inverse(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_kkt_inverse(a, p, opts);
#else
  return no_cuda_kernel("gdn_kkt_inverse");
#endif
}

Status dispatch_wu(const GdnWuArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_wu", &cpu));
  if (cpu) return detail::cpu_gdn_wu(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_wu(a, p, opts);
#else
  return no_cuda_kernel("gdn_wu");
#endif
}

Status dispatch_state_pass(const GdnStateArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_state_pass", &cpu));
  if (cpu) return detail::cpu_gdn_state_pass(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_state_pass(a, p, opts);
#else
  return no_cuda_kernel("gdn_state_pass");
#endif
}

Status dispatch_output(const GdnOutputArgs& a, const GdnProblem& p, const ExecOptions& opts,
                       const detail::GdnKernels& kernels) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_chunk_output", &cpu));
  if (cpu) return detail::cpu_gdn_chunk_output(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_chunk_output(a, p, opts, kernels);
#else
  (void)kernels;
  return no_cuda_kernel("gdn_chunk_output");
#endif
}

Status dispatch_chunk_forward(const GdnChunkArgs& a, const GdnProblem& p,
                              const ExecOptions& opts, const detail::GdnKernels& kernels) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_chunk_forward", &cpu));
  if (cpu) return detail::cpu_gdn_chunk_forward(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_chunk_forward(a, p, opts, kernels);
#else
  (void)kernels;
  return no_cuda_kernel("gdn_chunk_forward");
#endif
}

Status dispatch_decode(const GdnDecodeArgs& a, const GdnDecodeProblem& p,
                       const ExecOptions& opts, const detail::GdnKernels& kernels) {
  bool cpu = false;
  ATTNKIT_RETURN_IF_ERROR(route_cpu(p.device, opts, "gdn_decode_step", &cpu));
  if (cpu) return detail::cpu_gdn_decode_step(a, p, opts);
#ifdef ATTNKIT_WITH_CUDA
  return detail::cuda_gdn_decode_step(a, p, opts, kernels);
#else
  (void)kernels;
  return no_cuda_kernel("gdn_decode_step");
#endif
}

}  // namespace

namespace detail {

Status gdn_chunk_forward_with(const GdnChunkArgs& args, const ExecOptions& opts,
                              const GdnKernels& kernels) {
  return guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(validate_gdn_chunk(args, opts, &prob));
    return dispatch_chunk_forward(args, prob, opts, kernels);
  });
}

Status gdn_chunk_output_with(const GdnOutputArgs& args, const ExecOptions& opts,
                             const GdnKernels& kernels) {
  return guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(validate_gdn_output(args, opts, &prob));
    return dispatch_output(args, prob, opts, kernels);
  });
}

Status gdn_decode_step_with(const GdnDecodeArgs& args, const ExecOptions& opts,
                            const GdnKernels& kernels) {
  return guard([&]() -> Status {
    GdnDecodeProblem prob;
    ATTNKIT_RETURN_IF_ERROR(validate_gdn_decode(args, opts, &prob));
    return dispatch_decode(args, prob, opts, kernels);
  });
}

}  // namespace detail

Status gdn_chunk_forward(const GdnChunkArgs& args, const ExecOptions& opts) {
  return detail::gdn_chunk_forward_with(args, opts, {});
}

Status gdn_chunk_cumsum(const GdnCumsumArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_gdn_cumsum(args, opts, &prob));
    return dispatch_cumsum(args, prob, opts);
  });
}

Status gdn_kkt_inverse(const GdnKktInverseArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_gdn_kkt_inverse(args, opts, &prob));
    return dispatch_kkt_inverse(args, prob, opts);
  });
}

Status gdn_wu(const GdnWuArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_gdn_wu(args, opts, &prob));
    return dispatch_wu(args, prob, opts);
  });
}

Status gdn_state_pass(const GdnStateArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_gdn_state_pass(args, opts, &prob));
    return dispatch_state_pass(args, prob, opts);
  });
}

Status gdn_chunk_output(const GdnOutputArgs& args, const ExecOptions& opts) {
  return detail::gdn_chunk_output_with(args, opts, {});
}

Status gdn_num_chunks(const TensorView& q, const TensorView& cu_seqlens, int64_t* num_chunks) {
  return detail::count_gdn_chunks(q, cu_seqlens, num_chunks);
}

Status gdn_decode_step(const GdnDecodeArgs& args, const ExecOptions& opts) {
  return detail::gdn_decode_step_with(args, opts, {});
}

Status gdn_recurrent_forward(const GdnChunkArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    GdnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_gdn_chunk(args, opts, &prob));
    bool cpu = false;
    ATTNKIT_RETURN_IF_ERROR(route_cpu(prob.device, opts, "gdn_recurrent_forward", &cpu));
    if (!cpu)
      return Status::Unsupported(
          "gdn_recurrent_forward is the CPU reference only; pass host tensors (use "
          "gdn_chunk_forward on a GPU)");
    return detail::cpu_gdn_recurrent_forward(args, prob, opts);
  });
}

}  // namespace attnkit
