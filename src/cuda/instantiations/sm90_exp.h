// EXPERIMENT (temporary, not for merge): extra sm90 variants picked by ATTNKIT_SM90_EXP.
#pragma once
#include <cuda_runtime.h>
#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"
namespace attnkit::gpu {
// d64 causal, bf16, two consumer warpgroups (128-row tiles); causal_pairs picks the pair scheduler.
Status sm90_exp_d64w2_causal(const Sm90FwdArgs&, cudaStream_t);
// bf16 none / causal (pair scheduler) with kOverlapEpilogue, d64 (none only), d128, d256 (N=64).
Status sm90_exp_ovl_d64_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_ovl_d64_causal(const Sm90FwdArgs&, cudaStream_t);  // 3 WGs, PLF scheduler
Status sm90_exp_ovl_d128_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_ovl_d128_causal(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_ovl_d256_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_ovl_d256_causal(const Sm90FwdArgs&, cudaStream_t);
}  // namespace attnkit::gpu
