// THE list of compiled portable decode variants (decode_kernel.cuh): (Dqk, Dv, dtype, mask
// policy, score-mod policy, rows), rows = the most query tokens x GQA group per KV head (16 or 32).
// Each (Dqk, Dv, dtype) is defined by one TU in this folder, portable_decode_<dqk>_<dv>_<dtype>.cu
// (the linker reports an entry without one), and matched by the dispatcher
// (src/cuda/attention/portable/portable_dispatch.cu). Policies:
//   NoMask + NoScoreMod                the common case (no mask, or causal with one query token):
//                                      no per-element work outside the sequence end
//   WindowChunkMask + SoftcapAlibiMod  everything else: masks, softcap, ALiBi at run time
// Paged vs contiguous/ragged KV, sinks and LSE are run-time properties, not variants. Each entry
// also has a twin that reads K/V evict-first in L2 (_l2stream), which the planner picks for calls
// that read little K/V (decode_l2_stream).
#pragma once

#include "attnkit/status.h"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/instantiations/kernel_filter.h"

#define ATTNKIT_PORTABLE_DECODE_ROWS(X, DQK, DV, DT, MASK, MOD) \
  X(DQK, DV, DT, MASK, MOD, 16)                                 \
  X(DQK, DV, DT, MASK, MOD, 32)

#define ATTNKIT_PORTABLE_DECODE_POLICIES(X, DQK, DV, DT)                   \
  ATTNKIT_PORTABLE_DECODE_ROWS(X, DQK, DV, DT, NoMask, NoScoreMod)         \
  ATTNKIT_PORTABLE_DECODE_ROWS(X, DQK, DV, DT, WindowChunkMask, SoftcapAlibiMod)

// Entries are wrapped in the kernel filter's ATTNKIT_IF_DIMS / ATTNKIT_IF_DTYPE (kernel_filter.h).
#define ATTNKIT_PORTABLE_DECODE_DTYPES(X, DQK, DV)                                            \
  ATTNKIT_IF_DIMS(DQK, DV)(                                                                   \
      ATTNKIT_IF_DTYPE(bf16)(ATTNKIT_PORTABLE_DECODE_POLICIES(X, DQK, DV, bf16))              \
      ATTNKIT_IF_DTYPE(fp16)(ATTNKIT_PORTABLE_DECODE_POLICIES(X, DQK, DV, fp16)))

#define ATTNKIT_PORTABLE_DECODE_LIST(X)       \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 64, 64)   \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 96, 96)   \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 128, 128) \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 192, 128) \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 192, 192) \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 256, 256)

// The variants over an FP8 (e4m3) KV cache (suffix _e4m3kv), one TU per (Dqk, Dv, dtype):
// portable_decode_fp8_<dqk>_<dv>_<dtype>.cu.
#define ATTNKIT_PORTABLE_DECODE_FP8_LIST(X)   \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 64, 64)   \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 128, 128) \
  ATTNKIT_PORTABLE_DECODE_DTYPES(X, 256, 256)

namespace attnkit::gpu {
#define ATTNKIT_DECLARE_PORTABLE_DECODE(DQK, DV, DT, MASK, MOD, ROWS)                                  \
  Status portable_decode_##DQK##_##DV##_##DT##_##MASK##_##MOD##_r##ROWS(const FwdParams& p, void* stream); \
  Status portable_decode_##DQK##_##DV##_##DT##_##MASK##_##MOD##_r##ROWS##_l2stream(const FwdParams& p,     \
                                                                                  void* stream);
ATTNKIT_PORTABLE_DECODE_LIST(ATTNKIT_DECLARE_PORTABLE_DECODE)
#undef ATTNKIT_DECLARE_PORTABLE_DECODE
#define ATTNKIT_DECLARE_PORTABLE_DECODE_FP8(DQK, DV, DT, MASK, MOD, ROWS)                     \
  Status portable_decode_##DQK##_##DV##_##DT##_##MASK##_##MOD##_r##ROWS##_e4m3kv(             \
      const FwdParams& p, void* stream);
ATTNKIT_PORTABLE_DECODE_FP8_LIST(ATTNKIT_DECLARE_PORTABLE_DECODE_FP8)
#undef ATTNKIT_DECLARE_PORTABLE_DECODE_FP8
}  // namespace attnkit::gpu
