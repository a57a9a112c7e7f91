// Dispatch of the WGMMA/TMA fused state pass + chunk output (gdn_state_output_sm90.cuh): checks
// what its TMA loads need and picks the value columns per CTA and the cluster size.
#include <cstdint>

#include "cuda/gdn/chunk_launch.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_state_output_sm90.h"

namespace attnkit::gdn_cuda {

#if defined(ATTNKIT_HAS_SM90A)
namespace {

using LaunchFn = Status (*)(const StateOutParams&, const SeqLayout&, cudaStream_t);
using FitFn = Status (*)(int*);
struct Variant {
  LaunchFn launch;
  FitFn fit;
};
// One dtype's variants: 32 value columns per CTA in clusters of 1 or 2, and 64 in clusters of 2
// (picked on the narrow variant's fit, so only its launch is needed).
struct Variants {
  Variant c1, c2;
  LaunchFn wide;
};

// The CTAs of one (sequence, value head) run in clusters of two that share their C, Kᵀ, Q and P
// tiles through TMA multicast, unless that takes more waves than single CTAs. Each CTA's chain of
// chunk steps is latency-bound, so when the narrow CTAs (32 value columns, 4 per value head) would
// not all run at once, the wide ones (64 columns, 2 per value head: each chunk step less than
// twice as long, half as many CTAs) finish sooner (measured on 8 uneven sequences). Only the
// sequence count is known on the host (cu_seqlens is on the device), so a ragged batch dominated
// by one long sequence may still get the wide variant where the narrow one would have been
// faster. SoVariant forces the columns and the narrow variant's cluster size (timings, tests).
Status dispatch(const StateOutParams& p, const SeqLayout& L, cudaStream_t s, const Variants& v,
                SoVariant pick) {
  // Gates [B, T, heads padded to a multiple of 4] (16-byte rows): a chunk's gates are one TMA box
  // of 4 heads x 64 rows whose start is aligned whatever the chunk's first row.
  if (p.g_cum.dt != 0 || p.g_cum.sh != 1 || p.g_cum.st % 4 != 0 || p.g_cum.st < p.HV || p.g_cum.sb % 4 != 0 ||
      (reinterpret_cast<uintptr_t>(p.g_cum.p) & 15) != 0)
    return Status::Internal("gdn sm90 state/output: the gates must be fp32 [B, T, HV padded to 4]");
  for (const Tok* t : {&p.q, &p.k, &p.v, &p.tu, &p.pm})
    if (!rows_aligned16(*t))
      return Status::Internal("gdn sm90 state/output: q, k, v, C and P need 16-byte aligned rows");
  if (L.T > INT32_MAX - kChunk || L.N > 65535)
    return Status::Unsupported("gdn sm90 state/output: at most 2^31 - 65 rows and 65535 sequences");
  const int cols = pick.cols, cluster = pick.cluster;
  if (cols == 64) return v.wide(p, L, s);
  if (cluster == 1 || cluster == 2) return (cluster == 2 ? v.c2 : v.c1).launch(p, L, s);
  const int64_t ctas = int64_t{kHead / 32} * p.HV * L.N;
  int fit1 = 0, fit2 = 0;
  ATTNKIT_RETURN_IF_ERROR(v.c1.fit(&fit1));
  if (cols != 32 && ctas > fit1) return v.wide(p, L, s);
  ATTNKIT_RETURN_IF_ERROR(v.c2.fit(&fit2));
  const int64_t w1 = (ctas + fit1 - 1) / fit1, w2 = (ctas / 2 + fit2 - 1) / fit2;
  return (w2 <= w1 ? v.c2 : v.c1).launch(p, L, s);
}

}  // namespace

Status launch_state_output_sm90_bf16(const StateOutParams& p, const SeqLayout& L, cudaStream_t s,
                                     SoVariant pick) {
  return dispatch(p, L, s,
                  {{so_sm90_launch_bf16_c1_w32, so_sm90_fit_bf16_c1_w32},
                   {so_sm90_launch_bf16_c2_w32, so_sm90_fit_bf16_c2_w32},
                   so_sm90_launch_bf16_c2_w64},
                  pick);
}
Status launch_state_output_sm90_fp16(const StateOutParams& p, const SeqLayout& L, cudaStream_t s,
                                     SoVariant pick) {
  return dispatch(p, L, s,
                  {{so_sm90_launch_fp16_c1_w32, so_sm90_fit_fp16_c1_w32},
                   {so_sm90_launch_fp16_c2_w32, so_sm90_fit_fp16_c2_w32},
                   so_sm90_launch_fp16_c2_w64},
                  pick);
}
#else
Status launch_state_output_sm90_bf16(const StateOutParams&, const SeqLayout&, cudaStream_t,
                                     SoVariant) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
Status launch_state_output_sm90_fp16(const StateOutParams&, const SeqLayout&, cudaStream_t,
                                     SoVariant) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
#endif

}  // namespace attnkit::gdn_cuda
