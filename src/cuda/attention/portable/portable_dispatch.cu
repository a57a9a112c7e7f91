// TEMPORARY stub, replaced by the portable kernels' dispatcher.
#include "api/backends.h"

namespace attnkit::detail {
Status portable_attention_supports(const AttentionArgs&, const AttnProblem&) {
  return Status::Unsupported("portable CUDA attention not implemented yet");
}
Status portable_attention_plan(const AttentionArgs&, const AttnProblem&, const CudaDeviceInfo&,
                               AttentionPlan*) {
  return Status::Unsupported("portable CUDA attention not implemented yet");
}
Status portable_attention_forward(const AttentionArgs&, const AttnProblem&, const ExecOptions&,
                                  const AttentionPlan&) {
  return Status::Unsupported("portable CUDA attention not implemented yet");
}
Status cuda_merge_states(const MergeStatesArgs&, const MergeProblem&, const ExecOptions&) {
  return Status::Unsupported("CUDA merge_states not implemented yet");
}
}  // namespace attnkit::detail
