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
                             const ExecOptions& opts);
Status cuda_gdn_chunk_forward(const GdnChunkArgs& args, const GdnProblem& prob,
                              const ExecOptions& opts);
Status cuda_gdn_decode_step(const GdnDecodeArgs& args, const GdnDecodeProblem& prob,
                            const ExecOptions& opts);
#endif

}  // namespace attnkit::detail
