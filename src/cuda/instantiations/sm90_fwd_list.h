// THE list of compiled Hopper (sm_90a) prefill variants: (head dim, dtype, variant). Each variant
// names its (mask, score mod, sinks) policy types (sm90_fwd_launch.cuh). The dispatcher
// (src/cuda/attention/sm90/sm90_dispatch.cu) matches requests against this list. Every variant
// takes batched or per-sequence lengths (cu_seqlens_q / cu_seqlens_k / seqused_k) at run time.
//   none           no mask (keys past Sk are still masked in the last KV tile)
//   causal         bottom-right aligned causal (key j visible to query i when j <= i + Sk - Sq)
//   local          any mask of the API (sliding window, chunked; causal and none too), sizes at
//                  run time; no score mod, no sinks
//   local_softcap  local + softcap
//   local_sinks    local + learned sinks
//   none_n80       none with 80-key tiles (d256 only): the plan's pick for long keys
// TUs in this folder: sm90_fwd_d<D>_<dtype>.cu (none, causal) and sm90_fwd_d<D>_<dtype>_local.cu
// (the three local variants), so the common masks do not wait on the others in a build, and
// sm90_fwd_d256_<dtype>_n80.cu.
#pragma once

#include <cuda_runtime.h>

#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"

#define ATTNKIT_SM90_FWD_VARIANTS(X, D, DT) \
  X(D, DT, none)                            \
  X(D, DT, causal)                          \
  X(D, DT, local)                           \
  X(D, DT, local_softcap)                   \
  X(D, DT, local_sinks)

#define ATTNKIT_SM90_FWD_DTYPES(X, D)    \
  ATTNKIT_SM90_FWD_VARIANTS(X, D, bf16)  \
  ATTNKIT_SM90_FWD_VARIANTS(X, D, fp16)

#define ATTNKIT_SM90_FWD_LIST(X)  \
  ATTNKIT_SM90_FWD_DTYPES(X, 64)  \
  ATTNKIT_SM90_FWD_DTYPES(X, 128) \
  ATTNKIT_SM90_FWD_DTYPES(X, 256) \
  X(256, bf16, none_n80)          \
  X(256, fp16, none_n80)

namespace attnkit::gpu {
#define ATTNKIT_DECLARE_SM90_FWD(D, DT, VARIANT) \
  Status sm90_fwd_d##D##_##DT##_##VARIANT(const Sm90FwdArgs& a, cudaStream_t stream);
ATTNKIT_SM90_FWD_LIST(ATTNKIT_DECLARE_SM90_FWD)
#undef ATTNKIT_DECLARE_SM90_FWD
}  // namespace attnkit::gpu
