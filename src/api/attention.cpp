// attention_forward / merge_states: validate, pick a backend, run.
#include "attnkit/attention.h"

#include <string>

#include "api/backends.h"
#include "api/check.h"

namespace attnkit {
namespace {

using detail::AttnProblem;

Status cpu_plan(const AttnProblem& prob, AttentionPlan* plan) {
  plan->backend = Backend::kCPU;
  plan->kernel = "cpu-reference";
  plan->num_splits = 1;
  plan->workspace_bytes = 0;
  (void)prob;
  return Status::Ok();
}

// What no CUDA kernel serves yet, whatever the plan.
Status cuda_takes(const AttnProblem& prob) {
  if (prob.o_fp32)
    return Status::Unsupported(std::string("o is fp32 under ") + to_string(prob.dtype) +
                               " q: the CUDA kernels write O in q's dtype for now (fp32 O runs "
                               "on the CPU backend)");
  return Status::Ok();
}

Status plan_for(const AttentionArgs& args, const AttnProblem& prob, const ExecOptions& opts,
                AttentionPlan* plan) {
  if (prob.device.type == DeviceType::kCPU) {
    if (opts.backend != Backend::kAuto && opts.backend != Backend::kCPU)
      return Status::Invalid(std::string("backend ") + to_string(opts.backend) +
                             " needs tensors on a CUDA device, but q is on the cpu");
    return cpu_plan(prob, plan);
  }
  if (opts.backend == Backend::kCPU)
    return Status::Invalid("backend cpu needs host tensors, but q is on a CUDA device");
  ATTNKIT_RETURN_IF_ERROR(cuda_takes(prob));
#ifdef ATTNKIT_WITH_CUDA
  detail::CudaDeviceInfo dev;
  ATTNKIT_RETURN_IF_ERROR(detail::cuda_device_info(prob.device.index, &dev));
  const bool hopper = dev.cc_major == 9;
  if (opts.backend == Backend::kCudaSm90 || (opts.backend == Backend::kAuto && hopper)) {
    Status s = hopper ? detail::sm90_attention_supports(args, prob)
                      : Status::Unsupported("the sm90 backend needs a Hopper GPU (compute 9.x)");
    if (s.ok()) return detail::sm90_attention_plan(args, prob, dev, plan);
    if (opts.backend == Backend::kCudaSm90) return s;
  }
  ATTNKIT_RETURN_IF_ERROR(detail::portable_attention_supports(args, prob));
  return detail::portable_attention_plan(args, prob, dev, plan,
                                         opts.backend == Backend::kAuto
                                             ? detail::HopperDecode::kWherePays
                                             : detail::HopperDecode::kNever);
#else
  (void)args;
  return Status::Unsupported("this attnkit build has no CUDA support; tensors must be on the CPU");
#endif
}

Status run(const AttentionArgs& args, const AttnProblem& prob, const ExecOptions& opts,
           const AttentionPlan& plan) {
  // A plan is trusted only for the device and backend it was made for: a CPU plan with CUDA
  // tensors would read device memory on the host.
  const bool host = prob.device.type == DeviceType::kCPU;
  if (host != (plan.backend == Backend::kCPU))
    return Status::Invalid(std::string("plan is for the ") + to_string(plan.backend) +
                           " backend, but q is on " + (host ? "the cpu" : "a CUDA device"));
  if (opts.backend != Backend::kAuto && opts.backend != plan.backend)
    return Status::Invalid(std::string("plan is for the ") + to_string(plan.backend) +
                           " backend, but ExecOptions::backend asks for " + to_string(opts.backend));
  if (!host) ATTNKIT_RETURN_IF_ERROR(cuda_takes(prob));
  switch (plan.backend) {
    case Backend::kCPU: return detail::cpu_attention_forward(args, prob, opts);
#ifdef ATTNKIT_WITH_CUDA
    case Backend::kCudaPortable: return detail::portable_attention_forward(args, prob, opts, plan);
    case Backend::kCudaSm90: return detail::sm90_attention_forward(args, prob, opts, plan);
#endif
    default: return Status::Internal("plan names no runnable backend");
  }
}

}  // namespace

Status plan_attention(const AttentionArgs& args, const ExecOptions& opts, AttentionPlan* plan) {
  return detail::guard([&]() -> Status {
    if (plan == nullptr) return Status::Invalid("plan must not be null");
    AttnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_attention(args, opts, &prob));
    return plan_for(args, prob, opts, plan);
  });
}

Status attention_forward(const AttentionArgs& args, const ExecOptions& opts,
                         const AttentionPlan* plan) {
  return detail::guard([&]() -> Status {
    AttnProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_attention(args, opts, &prob));
    AttentionPlan local;
    if (plan == nullptr) {
      ATTNKIT_RETURN_IF_ERROR(plan_for(args, prob, opts, &local));
      plan = &local;
    }
    return run(args, prob, opts, *plan);
  });
}

Status merge_states(const MergeStatesArgs& args, const ExecOptions& opts) {
  return detail::guard([&]() -> Status {
    detail::MergeProblem prob;
    ATTNKIT_RETURN_IF_ERROR(detail::validate_merge_states(args, &prob));
    if (prob.device.type == DeviceType::kCPU) {
      if (opts.backend != Backend::kAuto && opts.backend != Backend::kCPU)
        return Status::Invalid("merge_states: a CUDA backend needs tensors on a CUDA device");
      return detail::cpu_merge_states(args, prob, opts);
    }
  #ifdef ATTNKIT_WITH_CUDA
    if (opts.backend == Backend::kCPU)
      return Status::Invalid("merge_states: backend cpu needs host tensors");
    return detail::cuda_merge_states(args, prob, opts);
  #else
    return Status::Unsupported("this attnkit build has no CUDA support; tensors must be on the CPU");
  #endif
  });
}

}  // namespace attnkit
