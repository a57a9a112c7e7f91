// THE list of compiled Hopper (sm_90a) prefill variants: (head dim, dtype, mask). One TU per
// (head dim, dtype) in this folder (sm90_fwd_d<D>_<dtype>.cu) defines both masks; the dispatcher
// (src/cuda/attention/sm90/sm90_dispatch.cu) matches requests against this list. Masks:
//   none    no mask (keys past Sk are still masked in the last KV tile)
//   causal  bottom-right aligned causal (key j visible to query i when j <= i + Sk - Sq)
#pragma once

#include <cuda_runtime.h>

#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"

#define ATTNKIT_SM90_FWD_MASKS(X, D, DT) \
  X(D, DT, none)                         \
  X(D, DT, causal)

#define ATTNKIT_SM90_FWD_DTYPES(X, D)  \
  ATTNKIT_SM90_FWD_MASKS(X, D, bf16)   \
  ATTNKIT_SM90_FWD_MASKS(X, D, fp16)

#define ATTNKIT_SM90_FWD_LIST(X)  \
  ATTNKIT_SM90_FWD_DTYPES(X, 64)  \
  ATTNKIT_SM90_FWD_DTYPES(X, 128) \
  ATTNKIT_SM90_FWD_DTYPES(X, 256)

namespace attnkit::gpu {
#define ATTNKIT_DECLARE_SM90_FWD(D, DT, MASK) \
  Status sm90_fwd_d##D##_##DT##_##MASK(const Sm90FwdArgs& a, cudaStream_t stream);
ATTNKIT_SM90_FWD_LIST(ATTNKIT_DECLARE_SM90_FWD)
#undef ATTNKIT_DECLARE_SM90_FWD
}  // namespace attnkit::gpu
