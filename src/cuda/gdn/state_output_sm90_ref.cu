// TEMPORARY (A/B only, removed before merge): main's fused state/output kernel and its dispatch,
// for bf16, run by the forward when ATTNKIT_GDN_SO_REF=1.
#include <cstdint>
#include <cstdlib>

#include "cuda/gdn/chunk_launch.h"
#include "cuda/gdn/gdn_device.cuh"

#if defined(ATTNKIT_HAS_SM90A)
#include "cuda/gdn/gdn_state_output_sm90_ref.cuh"
ATTNKIT_GDN_SO_SM90REF_DEFINE(bf16, cutlass::bfloat16_t, 1)
ATTNKIT_GDN_SO_SM90REF_DEFINE(bf16, cutlass::bfloat16_t, 2)
#endif

namespace attnkit::gdn_cuda {

Status launch_state_output_sm90ref_bf16(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) {
#if defined(ATTNKIT_HAS_SM90A)
  if (p.g_cum.dt != 0 || p.g_cum.sh != 1 || p.g_cum.st % 4 != 0 || p.g_cum.st < p.HV || p.g_cum.sb % 4 != 0 ||
      (reinterpret_cast<uintptr_t>(p.g_cum.p) & 15) != 0)
    return Status::Internal("gdn sm90 state/output (ref): the gates must be fp32 [B, T, HV padded to 4]");
  for (const Tok* t : {&p.q, &p.k, &p.w, &p.u, &p.pm})
    if (!rows_aligned16(*t)) return Status::Internal("gdn sm90 state/output (ref): unaligned rows");
  int cluster = 0;
  if (const char* env = std::getenv("ATTNKIT_GDN_CLUSTER")) cluster = std::atoi(env);
  if (cluster != 1 && cluster != 2) {
    int fit1 = 0, fit2 = 0;
    ATTNKIT_RETURN_IF_ERROR(so_sm90ref_fit_bf16_c1(&fit1));
    ATTNKIT_RETURN_IF_ERROR(so_sm90ref_fit_bf16_c2(&fit2));
    const int64_t ctas = int64_t{kHead / 32} * p.HV * L.N;
    const int64_t w1 = (ctas + fit1 - 1) / fit1, w2 = (ctas / 2 + fit2 - 1) / fit2;
    cluster = w2 <= w1 ? 2 : 1;
  }
  return cluster == 2 ? so_sm90ref_launch_bf16_c2(p, L, s) : so_sm90ref_launch_bf16_c1(p, L, s);
#else
  return Status::Unsupported("this attnkit build has no sm_90a target");
#endif
}

}  // namespace attnkit::gdn_cuda
