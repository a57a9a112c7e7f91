// EXPERIMENT (temporary, not for merge): d64 causal with two consumer warpgroups.
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"
#include "cuda/instantiations/sm90_exp.h"
namespace attnkit::gpu {
#if defined(ATTNKIT_HAS_SM90A)
Status sm90_exp_d64w2_causal(const Sm90FwdArgs& a, cudaStream_t s) {
  using namespace sm90;
  using Cfg = FwdConfig<cutlass::bfloat16_t, 64, true, 2>;
  if (a.causal_pairs)
    return launch_fwd<Cfg, PersistentCausalPairScheduler, MaskCausal, ScoreNone, SinkNone, KvContiguous>(a, s);
  return launch_fwd<Cfg, PersistentLongestFirstScheduler, MaskCausal, ScoreNone, SinkNone, KvContiguous>(a, s);
}
#else
Status sm90_exp_d64w2_causal(const Sm90FwdArgs&, cudaStream_t) { return Status::Unsupported("no sm90a"); }
#endif
}  // namespace attnkit::gpu
