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
// hopper_decode: on a Hopper GPU, plan decode on the TMA variant of the decode kernel where it
// reads the cache (kernel suffix +sm90tma). plan_attention asks for it with ExecOptions::backend
// auto when kHopperDecodeByDefault is set; it is not yet: the kernel has not passed the GPU suite
// (issue #34), so only plans made with hopper_decode (tests/cuda/sm90_decode_test.cpp) run it.
Status portable_attention_plan(const AttentionArgs& args, const AttnProblem& prob,
                               const CudaDeviceInfo& dev, AttentionPlan* plan,
                               bool hopper_decode = false);
inline constexpr bool kHopperDecodeByDefault = false;
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
