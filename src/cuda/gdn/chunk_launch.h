// Per-dtype launchers of the chunked-stage kernels, instantiated in chunk_bf16.cu / chunk_fp16.cu.
#pragma once

#include <cuda_runtime.h>

#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
struct SeqLayout;
#define ATTNKIT_GDN_DECLARE(SUFFIX)                                                                \
  Status launch_intra_##SUFFIX(const IntraParams&, const SeqLayout&, int64_t, cudaStream_t);        \
  Status launch_state_##SUFFIX(const StateParams&, const SeqLayout&, cudaStream_t);                 \
  Status launch_state_output_##SUFFIX(const StateOutParams&, const SeqLayout&, cudaStream_t);        \
  Status launch_output_##SUFFIX(const OutputParams&, const SeqLayout&, int64_t, cudaStream_t);
ATTNKIT_GDN_DECLARE(bf16)
ATTNKIT_GDN_DECLARE(fp16)
#undef ATTNKIT_GDN_DECLARE
// The fused state/output stage on WGMMA + TMA (state_output_sm90_*.cu): sm_90a builds, sm_90
// devices; other builds answer Unsupported. The gates must be head-major (g_cum.st == 1).
// The sm90 state/output kernel's variant: value columns per CTA (32 or 64) and, at 32, the
// cluster size (1 or 2); 0 leaves each to the launcher.
struct SoVariant {
  int cols = 0, cluster = 0;
};
Status launch_state_output_sm90_bf16(const StateOutParams&, const SeqLayout&, cudaStream_t,
                                     SoVariant = {});
Status launch_state_output_sm90_fp16(const StateOutParams&, const SeqLayout&, cudaStream_t,
                                     SoVariant = {});
// The whole forward's intra stage on WGMMA + TMA, one CTA per (chunk, q/k head)
// (gdn_intra_sm90.cuh): sm_90a builds, sm_90 devices, only the outputs the sm90 state/output kernel
// reads (the coefficients of U and W, P, the gate cumsum), all 16-bit in q's dtype; other builds
// answer Unsupported.
Status launch_intra_sm90_bf16(const IntraParams&, const SeqLayout&, int64_t max_chunks, cudaStream_t);
Status launch_intra_sm90_fp16(const IntraParams&, const SeqLayout&, int64_t max_chunks, cudaStream_t);
// The chunk-output stage op on WGMMA + TMA, a persistent grid of `sms` CTAs at most
// (gdn_output_sm90.cuh): sm_90a builds, sm_90 devices, the calls output_sm90_supports accepts
// (q, k, v_new, h and o in bf16, 16-byte aligned rows); launch_output_* serves the rest.
bool output_sm90_supports(const OutputParams&, const SeqLayout&, int64_t max_chunks);
Status launch_output_sm90(const OutputParams&, const SeqLayout&, int64_t max_chunks, int sms, cudaStream_t);
}  // namespace attnkit::gdn_cuda
