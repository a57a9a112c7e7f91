// THE list of compiled Hopper (sm_90a) prefill variants: (head dims, dtype, variant); head dims are
// one token, D for Dqk = Dv = D or Dqk_Dv (192_128). Each variant
// names its (mask, score mod, sinks) policy types (sm90_fwd_launch.cuh). The dispatcher
// (src/cuda/attention/sm90/sm90_dispatch.cu) matches requests against this list. Every variant
// takes batched or per-sequence lengths (cu_seqlens_q / cu_seqlens_k / seqused_k) and a split-KV
// count (partials for the combine kernel) at run time.
//   none           no mask (keys past Sk are still masked in the last KV tile)
//   causal         bottom-right aligned causal (key j visible to query i when j <= i + Sk - Sq)
//   local          any mask of the API (sliding window, chunked; causal and none too), sizes at
//                  run time; no score mod, no sinks
//   local_softcap  local + softcap
//   local_sinks    local + learned sinks
//   none_n80       none with 80-key tiles (d256 only): the plan's pick for long keys
//   paged_none, paged_causal, paged_local
//                  none / causal / local over a paged KV cache (page table, seqused_k), whose page
//                  size is a multiple of the KV tile (sm90_kv_block: 128 keys at D <= 128, 64 at
//                  256); no score mod, no sinks
// TUs in this folder: sm90_fwd_d<D>_<dtype>.cu (none, causal), sm90_fwd_d<D>_<dtype>_local.cu
// (the three local variants) and sm90_fwd_d<D>_<dtype>_paged.cu (the three paged ones), so the
// common masks do not wait on the others in a build; sm90_fwd_d256_<dtype>_n80.cu;
// sm90_fwd_d192_128_<dtype>.cu and sm90_fwd_d96_<dtype>.cu (none, causal). 24 TUs, 58 variants.
#pragma once

#include <cuda_runtime.h>

#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"
#include "cuda/instantiations/kernel_filter.h"

#define ATTNKIT_SM90_FWD_VARIANTS(X, D, DT) \
  X(D, DT, none)                            \
  X(D, DT, causal)                          \
  X(D, DT, local)                           \
  X(D, DT, local_softcap)                   \
  X(D, DT, local_sinks)                     \
  X(D, DT, paged_none)                      \
  X(D, DT, paged_causal)                    \
  X(D, DT, paged_local)

#define ATTNKIT_SM90_FWD_DTYPES(X, D)                             \
  ATTNKIT_IF_DTYPE(bf16)(ATTNKIT_SM90_FWD_VARIANTS(X, D, bf16)) \
  ATTNKIT_IF_DTYPE(fp16)(ATTNKIT_SM90_FWD_VARIANTS(X, D, fp16))

// Head dims 192/128 and 96: no mask and causal only.
#define ATTNKIT_SM90_FWD_PLAIN(X, D)                                     \
  ATTNKIT_IF_DTYPE(bf16)(X(D, bf16, none) X(D, bf16, causal))          \
  ATTNKIT_IF_DTYPE(fp16)(X(D, fp16, none) X(D, fp16, causal))

// Entries are wrapped in the kernel filter's ATTNKIT_IF_DIMS / ATTNKIT_IF_DTYPE (kernel_filter.h).
#define ATTNKIT_SM90_FWD_LIST(X)                                            \
  ATTNKIT_IF_DIMS(64, 64)(ATTNKIT_SM90_FWD_DTYPES(X, 64))                   \
  ATTNKIT_IF_DIMS(128, 128)(ATTNKIT_SM90_FWD_DTYPES(X, 128))                \
  ATTNKIT_IF_DIMS(256, 256)(ATTNKIT_SM90_FWD_DTYPES(X, 256)                 \
                            ATTNKIT_IF_DTYPE(bf16)(X(256, bf16, none_n80))  \
                            ATTNKIT_IF_DTYPE(fp16)(X(256, fp16, none_n80))) \
  ATTNKIT_IF_DIMS(192, 128)(ATTNKIT_SM90_FWD_PLAIN(X, 192_128))             \
  ATTNKIT_IF_DIMS(96, 96)(ATTNKIT_SM90_FWD_PLAIN(X, 96))

// The D token of a variant -> its (Dqk, Dv).
#define ATTNKIT_SM90_DIMS_64 64, 64
#define ATTNKIT_SM90_DIMS_96 96, 96
#define ATTNKIT_SM90_DIMS_128 128, 128
#define ATTNKIT_SM90_DIMS_256 256, 256
#define ATTNKIT_SM90_DIMS_192_128 192, 128

namespace attnkit::gpu {
#define ATTNKIT_DECLARE_SM90_FWD(D, DT, VARIANT) \
  Status sm90_fwd_d##D##_##DT##_##VARIANT(const Sm90FwdArgs& a, cudaStream_t stream);
ATTNKIT_SM90_FWD_LIST(ATTNKIT_DECLARE_SM90_FWD)
#undef ATTNKIT_DECLARE_SM90_FWD
}  // namespace attnkit::gpu
