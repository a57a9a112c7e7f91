// TEMPORARY stub, replaced by the CPU reference.
#include "api/backends.h"
namespace attnkit::detail {
Status cpu_attention_forward(const AttentionArgs&, const AttnProblem&, const ExecOptions&) {
  return Status::Unsupported("cpu attention not implemented yet");
}
Status cpu_merge_states(const MergeStatesArgs&, const MergeProblem&, const ExecOptions&) {
  return Status::Unsupported("cpu merge_states not implemented yet");
}
}  // namespace attnkit::detail
