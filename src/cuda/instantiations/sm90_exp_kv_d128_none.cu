// EXPERIMENT (temporary, not for merge): kv_d128_none
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"
#include "cuda/instantiations/sm90_exp.h"
namespace attnkit::gpu {
#if defined(ATTNKIT_HAS_SM90A)
Status sm90_exp_kv_d128_none(const Sm90FwdArgs& a, cudaStream_t s) {
  using namespace sm90;
  using bf = cutlass::bfloat16_t;
  using Cfg = WithExp<FwdConfig<bf, 128, false>, 4>;
  return launch_fwd<Cfg, PersistentScheduler, MaskNone, ScoreNone, SinkNone>(a, s);
}
#else
Status sm90_exp_kv_d128_none(const Sm90FwdArgs&, cudaStream_t) { return Status::Unsupported("no sm90a"); }
#endif
}  // namespace attnkit::gpu
