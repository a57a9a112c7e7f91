// THE list of compiled portable prefill variants: (Dqk, Dv, dtype, mask policy, score-mod
// policy, tile: prefill). Each entry is defined by one TU in this folder
// (portable_fwd_<dqk>_<dv>_<dtype>_<mask>_<mod>.cu; the linker reports an entry without one)
// and matched by the dispatcher
// (src/cuda/attention/portable/portable_dispatch.cu); a request no entry serves is Unsupported.
// Policies:
//   NoMask + NoScoreMod            plain attention, no per-element mask outside the sequence end
//   WindowChunkMask + NoScoreMod   causal / sliding window / chunked (run-time bounds)
//   WindowChunkMask + SoftcapAlibiMod  everything: masks, softcap, ALiBi
// Each entry has two launchers: the regular tiles, and _compact, the tiles for devices that grant a
// block at most 99 KB of shared memory (fwd_launch.cuh). Decode shapes run on their own kernel,
// listed in portable_decode_list.h.
// Paged vs contiguous/ragged KV is a run-time property of the KV operand, not a variant.
#pragma once

#include "attnkit/status.h"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/instantiations/kernel_filter.h"

#define ATTNKIT_PORTABLE_FWD_POLICIES(X, DQK, DV, DT)          \
  X(DQK, DV, DT, NoMask, NoScoreMod, prefill)                  \
  X(DQK, DV, DT, WindowChunkMask, NoScoreMod, prefill)         \
  X(DQK, DV, DT, WindowChunkMask, SoftcapAlibiMod, prefill)

// Entries are wrapped in the kernel filter's ATTNKIT_IF_DIMS / ATTNKIT_IF_DTYPE (kernel_filter.h).
#define ATTNKIT_PORTABLE_FWD_DTYPES(X, DQK, DV)                                  \
  ATTNKIT_IF_DIMS(DQK, DV)(                                                      \
      ATTNKIT_IF_DTYPE(bf16)(ATTNKIT_PORTABLE_FWD_POLICIES(X, DQK, DV, bf16))    \
      ATTNKIT_IF_DTYPE(fp16)(ATTNKIT_PORTABLE_FWD_POLICIES(X, DQK, DV, fp16)))

#define ATTNKIT_PORTABLE_FWD_LIST(X)       \
  ATTNKIT_PORTABLE_FWD_DTYPES(X, 64, 64)   \
  ATTNKIT_PORTABLE_FWD_DTYPES(X, 96, 96)   \
  ATTNKIT_PORTABLE_FWD_DTYPES(X, 128, 128) \
  ATTNKIT_PORTABLE_FWD_DTYPES(X, 192, 128) \
  ATTNKIT_PORTABLE_FWD_DTYPES(X, 192, 192) \
  ATTNKIT_PORTABLE_FWD_DTYPES(X, 256, 256)

namespace attnkit::gpu {
#define ATTNKIT_DECLARE_PORTABLE_FWD(DQK, DV, DT, MASK, MOD, TILE)                                \
  Status portable_fwd_##DQK##_##DV##_##DT##_##MASK##_##MOD##_##TILE(const FwdParams& p, void* stream); \
  Status portable_fwd_##DQK##_##DV##_##DT##_##MASK##_##MOD##_##TILE##_compact(const FwdParams& p,      \
                                                                             void* stream);
ATTNKIT_PORTABLE_FWD_LIST(ATTNKIT_DECLARE_PORTABLE_FWD)
#undef ATTNKIT_DECLARE_PORTABLE_FWD
}  // namespace attnkit::gpu
