// Backend entry points for Gated DeltaNet, called by the dispatcher in api/gdn.cpp after validation.
// Each receives the validated arguments and the normalised problem; it never re-validates shapes.
#pragma once

#include "api/gdn_problem.h"
#include "attnkit/gdn.h"
#include "attnkit/options.h"

namespace attnkit::detail {

// ---- CPU reference (src/cpu/gdn_*.cpp). Need prob.indices_on_host (always true for host tensors).
Status cpu_gdn_chunk_cumsum(const GdnCumsumArgs& args, const GdnProblem& prob,
                            const ExecOptions& opts);
Status cpu_gdn_kkt_inverse(const GdnKktInverseArgs& args, const GdnProblem& prob,
                           const ExecOptions& opts);
Status cpu_gdn_wu(const GdnWuArgs& args, const GdnProblem& prob, const ExecOptions& opts);
Status cpu_gdn_state_pass(const GdnStateArgs& args, const GdnProblem& prob,
                          const ExecOptions& opts);
Status cpu_gdn_chunk_output(const GdnOutputArgs& args, const GdnProblem& prob,
                            const ExecOptions& opts);
// The five stages per chunk with fp32 intermediates (q/k L2-normalised first when asked).
Status cpu_gdn_chunk_forward(const GdnChunkArgs& args, const GdnProblem& prob,
                             const ExecOptions& opts);
// The token-by-token recurrence.
Status cpu_gdn_recurrent_forward(const GdnChunkArgs& args, const GdnProblem& prob,
                                 const ExecOptions& opts);
Status cpu_gdn_decode_step(const GdnDecodeArgs& args, const GdnDecodeProblem& prob,
                           const ExecOptions& opts);

// Which CUDA kernels a call runs where several serve it. The library decides (all defaults);
// tests and benchmarks force one to compare it with the others.
struct GdnKernels {
  bool mma_sync = false;        // the mma.sync / register kernels on Hopper too (other GPUs' ones)
  bool mma_sync_intra = false;  // those of the forward's intra stage only
  bool decode_ring = false;     // the decode step's TMA ring at any batch, not from 1 state per SM
  int state_output_cols = 0;    // the sm90 state/output kernel's value columns per CTA: 32 or 64
  int state_output_cluster = 0; // its cluster size at 32 columns: 1 or 2
  // > 1: the forward splits each sequence's chunk chain into up to this many segments run in
  // parallel (gdn_split.cu); not yet chosen by the library.
  int segments = 0;
};

// The public calls with their CUDA kernels chosen (tests, gdn_bench, `attnkit check
// --gdn-kernels`); gdn_chunk_forward and the rest are these with the library's choice.
Status gdn_chunk_forward_with(const GdnChunkArgs& args, const ExecOptions& opts,
                              const GdnKernels& kernels);
Status gdn_chunk_output_with(const GdnOutputArgs& args, const ExecOptions& opts,
                             const GdnKernels& kernels);
Status gdn_decode_step_with(const GdnDecodeArgs& args, const ExecOptions& opts,
                            const GdnKernels& kernels);

#ifdef ATTNKIT_WITH_CUDA
// ---- CUDA (src/cuda/gdn/gdn_entry.cu): K = V = 128, bf16/fp16 q/k/v (decode: any token dtype).
// Device-side cu_seqlens / state indices are clamped by the kernels, never read by the host.
Status cuda_gdn_chunk_cumsum(const GdnCumsumArgs& args, const GdnProblem& prob,
                             const ExecOptions& opts);
Status cuda_gdn_kkt_inverse(const GdnKktInverseArgs& args, const GdnProblem& prob,
                            const ExecOptions& opts);
Status cuda_gdn_wu(const GdnWuArgs& args, const GdnProblem& prob, const ExecOptions& opts);
Status cuda_gdn_state_pass(const GdnStateArgs& args, const GdnProblem& prob,
                           const ExecOptions& opts);
Status cuda_gdn_chunk_output(const GdnOutputArgs& args, const GdnProblem& prob,
                             const ExecOptions& opts, const GdnKernels& kernels = {});
Status cuda_gdn_chunk_forward(const GdnChunkArgs& args, const GdnProblem& prob,
                              const ExecOptions& opts, const GdnKernels& kernels = {});
Status cuda_gdn_decode_step(const GdnDecodeArgs& args, const GdnDecodeProblem& prob,
                            const ExecOptions& opts, const GdnKernels& kernels = {});
// The forward with kernels.segments > 1 (src/cuda/gdn/gdn_split.cu).
Status cuda_gdn_chunk_forward_split(const GdnChunkArgs& args, const GdnProblem& prob,
                                    const ExecOptions& opts, const GdnKernels& kernels);
#endif

}  // namespace attnkit::detail
