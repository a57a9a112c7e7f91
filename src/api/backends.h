// The backend entry points the dispatcher calls. Each backend receives validated arguments and the
// normalised problem; it never re-validates shapes. CUDA entry points exist only in CUDA builds.
#pragma once

#include "api/attention_problem.h"
#include "attnkit/attention.h"
#include "attnkit/gdn.h"
#include "attnkit/options.h"

namespace attnkit::detail {

// ---- CPU reference (src/cpu)
Status cpu_attention_forward(const AttentionArgs& args, const AttnProblem& prob,
                             const ExecOptions& opts);
Status cpu_merge_states(const MergeStatesArgs& args, const MergeProblem& prob,
                        const ExecOptions& opts);

#ifdef ATTNKIT_WITH_CUDA
// ---- Device facts (src/cuda/common)
struct CudaDeviceInfo {
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  int64_t l2_bytes = 0;
  int smem_per_block_optin = 0;  // the most dynamic shared memory a block may ask for
};
Status cuda_device_info(int device, CudaDeviceInfo* info);

// ---- Portable sm_80+ kernels (src/cuda/attention/portable)
// OK when a kernel instantiation serves the problem; otherwise Unsupported saying why.
Status portable_attention_supports(const AttentionArgs& args, const AttnProblem& prob);
// Where a decode plan on a Hopper GPU takes the TMA variant of the decode kernel (kernel suffix
// +sm90tma), when TMA can read the cache: never, where it pays (tma_decode_pays in
// portable/planner.h: what plan_attention asks for with ExecOptions::backend auto), or always
// (tests, and `attnkit bench --decode-kernel sm90tma`).
enum class HopperDecode { kNever, kWherePays, kAlways };
Status portable_attention_plan(const AttentionArgs& args, const AttnProblem& prob,
                               const CudaDeviceInfo& dev, AttentionPlan* plan,
                               HopperDecode hopper_decode = HopperDecode::kNever);
Status portable_attention_forward(const AttentionArgs& args, const AttnProblem& prob,
                                  const ExecOptions& opts, const AttentionPlan& plan);
Status cuda_merge_states(const MergeStatesArgs& args, const MergeProblem& prob,
                         const ExecOptions& opts);

// ---- Hopper kernels (src/cuda/attention/sm90)
Status sm90_attention_supports(const AttentionArgs& args, const AttnProblem& prob);
Status sm90_attention_plan(const AttentionArgs& args, const AttnProblem& prob,
                           const CudaDeviceInfo& dev, AttentionPlan* plan);
Status sm90_attention_forward(const AttentionArgs& args, const AttnProblem& prob,
                              const ExecOptions& opts, const AttentionPlan& plan);
#endif

}  // namespace attnkit::detail
