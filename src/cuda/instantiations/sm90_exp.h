// EXPERIMENT (temporary, not for merge): extra sm90 variants picked by ATTNKIT_SM90_EXP=<name>.
#pragma once
#include <cuda_runtime.h>
#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"
namespace attnkit::gpu {
using Sm90ExpFn = Status (*)(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_oldepi_d128_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_oldepi_d256_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_rsearly_d128_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_rsearly_d256_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_n80_d256_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_st2_d128_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_w3n64_d128_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_kv_d64_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_kv_d128_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_kv_d128_causal(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_kv_d256_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_kv_d256_causal(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_n80kv_d256_none(const Sm90FwdArgs&, cudaStream_t);
Status sm90_exp_kvrs_d128_none(const Sm90FwdArgs&, cudaStream_t);
// The variant `name` for head dim d and policies (none / causal), or nullptr.
Sm90ExpFn sm90_exp_find(const char* name, int d, const char* policies);
}  // namespace attnkit::gpu
