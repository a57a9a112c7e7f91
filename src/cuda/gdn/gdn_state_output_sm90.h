// The WGMMA/TMA fused state/output variants, by cluster size and value columns per CTA (one
// translation unit each, sm_90a builds only), and how many clusters of the narrow ones fit on the
// current device.
#pragma once

#include <cuda_runtime.h>

#include "attnkit/status.h"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
struct SeqLayout;
#define ATTNKIT_GDN_SO_SM90_DECLARE(DT, C, W) \
  Status so_sm90_launch_##DT##_c##C##_w##W(const StateOutParams&, const SeqLayout&, cudaStream_t);
#define ATTNKIT_GDN_SO_SM90_DECLARE_FIT(DT, C, W) Status so_sm90_fit_##DT##_c##C##_w##W(int* clusters);
ATTNKIT_GDN_SO_SM90_DECLARE(bf16, 1, 32)
ATTNKIT_GDN_SO_SM90_DECLARE(bf16, 2, 32)
ATTNKIT_GDN_SO_SM90_DECLARE(bf16, 2, 64)
ATTNKIT_GDN_SO_SM90_DECLARE(fp16, 1, 32)
ATTNKIT_GDN_SO_SM90_DECLARE(fp16, 2, 32)
ATTNKIT_GDN_SO_SM90_DECLARE(fp16, 2, 64)
// The wide variants' fit is not read (the dispatch decides on the narrow ones').
ATTNKIT_GDN_SO_SM90_DECLARE_FIT(bf16, 1, 32)
ATTNKIT_GDN_SO_SM90_DECLARE_FIT(bf16, 2, 32)
ATTNKIT_GDN_SO_SM90_DECLARE_FIT(fp16, 1, 32)
ATTNKIT_GDN_SO_SM90_DECLARE_FIT(fp16, 2, 32)
#undef ATTNKIT_GDN_SO_SM90_DECLARE
#undef ATTNKIT_GDN_SO_SM90_DECLARE_FIT
}  // namespace attnkit::gdn_cuda
