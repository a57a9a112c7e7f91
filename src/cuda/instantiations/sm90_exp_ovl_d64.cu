// EXPERIMENT (temporary, not for merge): d64 bf16 with the epilogue overlapped by the next S.
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"
#include "cuda/instantiations/sm90_exp.h"
namespace attnkit::gpu {
#if defined(ATTNKIT_HAS_SM90A)
namespace {
template <class B>
struct Ovl : B {
  static constexpr bool kOverlapEpilogue = true;
};
}  // namespace
Status sm90_exp_ovl_d64_none(const Sm90FwdArgs& a, cudaStream_t s) {
  using namespace sm90;
  using Cfg = Ovl<FwdConfig<cutlass::bfloat16_t, 64, false>>;
  return launch_fwd<Cfg, PersistentScheduler, MaskNone, ScoreNone, SinkNone, KvContiguous>(a, s);
}
Status sm90_exp_ovl_d64_causal(const Sm90FwdArgs& a, cudaStream_t s) {
  using namespace sm90;
  using Cfg = Ovl<FwdConfig<cutlass::bfloat16_t, 64, true>>;
  return launch_fwd<Cfg, PersistentLongestFirstScheduler, MaskCausal, ScoreNone, SinkNone, KvContiguous>(a, s);
}
#else
Status sm90_exp_ovl_d64_causal(const Sm90FwdArgs&, cudaStream_t) { return Status::Unsupported("no sm90a"); }
Status sm90_exp_ovl_d64_none(const Sm90FwdArgs&, cudaStream_t) { return Status::Unsupported("no sm90a"); }
#endif
}  // namespace attnkit::gpu
