// THE list of compiled Hopper (sm_90a) decode variants (sm90_decode_kernel.cuh): (head dim, dtype,
// mask policy, score-mod policy, rows), Dqk = Dv, rows = the most query tokens x GQA group per KV
// head (16 or 32). Policies as the portable decode list (portable_decode_list.h): NoMask +
// NoScoreMod for the common case, WindowChunkMask + SoftcapAlibiMod for everything else. Each
// (head dim, dtype) is defined by one TU in this folder, sm90_decode_d<D>_<dtype>.cu, in sm_90a
// builds only; the portable dispatcher (portable_dispatch.cu) pairs each with the portable decode
// variant of the same key and plans it on Hopper for bf16 / fp16 caches TMA can read.
#pragma once

#include "attnkit/status.h"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/instantiations/kernel_filter.h"

#define ATTNKIT_SM90_DECODE_ROWS(X, D, DT, MASK, MOD) \
  X(D, DT, MASK, MOD, 16)                             \
  X(D, DT, MASK, MOD, 32)

#define ATTNKIT_SM90_DECODE_POLICIES(X, D, DT)            \
  ATTNKIT_SM90_DECODE_ROWS(X, D, DT, NoMask, NoScoreMod) \
  ATTNKIT_SM90_DECODE_ROWS(X, D, DT, WindowChunkMask, SoftcapAlibiMod)

#define ATTNKIT_SM90_DECODE_DTYPES(X, D)                                 \
  ATTNKIT_IF_DIMS(D, D)(                                                 \
      ATTNKIT_IF_DTYPE(bf16)(ATTNKIT_SM90_DECODE_POLICIES(X, D, bf16))   \
      ATTNKIT_IF_DTYPE(fp16)(ATTNKIT_SM90_DECODE_POLICIES(X, D, fp16)))

#define ATTNKIT_SM90_DECODE_LIST(X) \
  ATTNKIT_SM90_DECODE_DTYPES(X, 64) \
  ATTNKIT_SM90_DECODE_DTYPES(X, 128) \
  ATTNKIT_SM90_DECODE_DTYPES(X, 256)

#define ATTNKIT_SM90_DECODE_FN(D, DT, MASK, MOD, ROWS) \
  sm90_decode_##D##_##DT##_##MASK##_##MOD##_r##ROWS

#if defined(ATTNKIT_HAS_SM90A)
namespace attnkit::gpu::sm90 {
#define ATTNKIT_DECLARE_SM90_DECODE(D, DT, MASK, MOD, ROWS)                                  \
  Status ATTNKIT_SM90_DECODE_FN(D, DT, MASK, MOD, ROWS)(const FwdParams& p, bool l2_evict_first, \
                                                        void* stream);
ATTNKIT_SM90_DECODE_LIST(ATTNKIT_DECLARE_SM90_DECODE)
#undef ATTNKIT_DECLARE_SM90_DECODE
}  // namespace attnkit::gpu::sm90
#endif
