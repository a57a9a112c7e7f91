// The chunked-stage kernels for fp16 q/k/v (one translation unit per dtype variant).
#include "cuda/common/cuda_check.h"
#include "cuda/gdn/chunk_launch.h"
#include "cuda/gdn/gdn_intra.cuh"
#include "cuda/gdn/gdn_output.cuh"
#include "cuda/gdn/gdn_state.cuh"
#include "cuda/gdn/gdn_state_output.cuh"

namespace attnkit::gdn_cuda {
Status launch_intra_fp16(const IntraParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  return launch_intra_t<__half>(p, L, max_chunks, s);
}
Status launch_state_fp16(const StateParams& p, const SeqLayout& L, cudaStream_t s) {
  return launch_state_t<__half>(p, L, s);
}
Status launch_state_output_fp16(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) {
  return launch_state_output_t<__half>(p, L, s);
}
Status launch_output_fp16(const OutputParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  return launch_output_t<__half>(p, L, max_chunks, s);
}
}  // namespace attnkit::gdn_cuda
