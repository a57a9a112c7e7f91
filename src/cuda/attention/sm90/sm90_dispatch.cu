// Hopper (sm_90a) attention: not built yet (issue: warp-specialized TMA + WGMMA kernel). Until it
// exists, requests report Unsupported here and the dispatcher uses the portable kernels, naming them
// in the plan.
#include "api/backends.h"

namespace attnkit::detail {

Status sm90_attention_supports(const AttentionArgs&, const AttnProblem&) {
  return Status::Unsupported("the sm90 (TMA + WGMMA) attention kernel is not implemented yet");
}
Status sm90_attention_plan(const AttentionArgs&, const AttnProblem&, const CudaDeviceInfo&,
                           AttentionPlan*) {
  return Status::Unsupported("the sm90 (TMA + WGMMA) attention kernel is not implemented yet");
}
Status sm90_attention_forward(const AttentionArgs&, const AttnProblem&, const ExecOptions&,
                              const AttentionPlan&) {
  return Status::Unsupported("the sm90 (TMA + WGMMA) attention kernel is not implemented yet");
}

}  // namespace attnkit::detail
