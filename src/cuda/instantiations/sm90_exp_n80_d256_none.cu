// EXPERIMENT (temporary, not for merge): n80_d256_none
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"
#include "cuda/instantiations/sm90_exp.h"
namespace attnkit::gpu {
#if defined(ATTNKIT_HAS_SM90A)
Status sm90_exp_n80_d256_none(const Sm90FwdArgs& a, cudaStream_t s) {
  using namespace sm90;
  using bf = cutlass::bfloat16_t;
  using Cfg = FwdConfig<bf, 256, false, 2, 80, 2>;
  return launch_fwd<Cfg, PersistentScheduler, MaskNone, ScoreNone, SinkNone>(a, s);
}
#else
Status sm90_exp_n80_d256_none(const Sm90FwdArgs&, cudaStream_t) { return Status::Unsupported("no sm90a"); }
#endif
}  // namespace attnkit::gpu
