// Dispatch of the WGMMA/TMA fused state pass + chunk output (gdn_state_output_sm90.cuh): checks
// what its TMA loads need and picks the cluster size.
#include <cstdint>
#include <cstdlib>

#include "cuda/gdn/chunk_launch.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_state_output_sm90.h"

namespace attnkit::gdn_cuda {

#if defined(ATTNKIT_HAS_SM90A)
namespace {

using LaunchFn = Status (*)(const StateOutParams&, const SeqLayout&, cudaStream_t);
using FitFn = Status (*)(int*);

// The CTAs of one (sequence, value head) run in clusters of two that share their U / W
// coefficient, Kᵀ, Q and P tiles through TMA multicast, unless that takes more waves than single CTAs.
// ATTNKIT_GDN_CLUSTER=1|2 in the environment forces a size (timings, tests).
Status dispatch(const StateOutParams& p, const SeqLayout& L, cudaStream_t s, LaunchFn l1, LaunchFn l2, FitFn f1,
                FitFn f2) {
  // Gates [B, T, heads padded to a multiple of 4] (16-byte rows): a chunk's gates are one TMA box
  // of 4 heads x 64 rows whose start is aligned whatever the chunk's first row.
  if (p.g_cum.dt != 0 || p.g_cum.sh != 1 || p.g_cum.st % 4 != 0 || p.g_cum.st < p.HV || p.g_cum.sb % 4 != 0 ||
      (reinterpret_cast<uintptr_t>(p.g_cum.p) & 15) != 0)
    return Status::Internal("gdn sm90 state/output: the gates must be fp32 [B, T, HV padded to 4]");
  for (const Tok* t : {&p.q, &p.k, &p.v, &p.tu, &p.pm})
    if (!rows_aligned16(*t))
      return Status::Internal("gdn sm90 state/output: q, k, v, the U / W coefficients and P need 16-byte aligned rows");
  if (L.T > INT32_MAX - kChunk || L.N > 65535)
    return Status::Unsupported("gdn sm90 state/output: at most 2^31 - 65 rows and 65535 sequences");
  int cluster = 0;
  if (const char* env = std::getenv("ATTNKIT_GDN_CLUSTER")) cluster = std::atoi(env);
  if (cluster != 1 && cluster != 2) {
    int fit1 = 0, fit2 = 0;
    ATTNKIT_RETURN_IF_ERROR(f1(&fit1));
    ATTNKIT_RETURN_IF_ERROR(f2(&fit2));
    const int64_t ctas = int64_t{kHead / 32} * p.HV * L.N;
    const int64_t w1 = (ctas + fit1 - 1) / fit1, w2 = (ctas / 2 + fit2 - 1) / fit2;
    cluster = w2 <= w1 ? 2 : 1;
  }
  return cluster == 2 ? l2(p, L, s) : l1(p, L, s);
}

}  // namespace

Status launch_state_output_sm90_bf16(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) {
  return dispatch(p, L, s, so_sm90_launch_bf16_c1, so_sm90_launch_bf16_c2, so_sm90_fit_bf16_c1, so_sm90_fit_bf16_c2);
}
Status launch_state_output_sm90_fp16(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) {
  return dispatch(p, L, s, so_sm90_launch_fp16_c1, so_sm90_launch_fp16_c2, so_sm90_fit_fp16_c1, so_sm90_fit_fp16_c2);
}
#else
Status launch_state_output_sm90_bf16(const StateOutParams&, const SeqLayout&, cudaStream_t) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
Status launch_state_output_sm90_fp16(const StateOutParams&, const SeqLayout&, cudaStream_t) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
#endif

}  // namespace attnkit::gdn_cuda
