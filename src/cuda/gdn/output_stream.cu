// The chunk-output stage's streaming kernel (gdn_output_stream.cuh), for both 16-bit dtypes.
#include "cuda/gdn/chunk_launch.h"
#include "cuda/gdn/gdn_output_stream.cuh"

namespace attnkit::gdn_cuda {
Status launch_output_stream_bf16(const OutputParams& p, const SeqLayout& L, int64_t max_chunks, bool bulk,
                                 cudaStream_t s) {
  return launch_output_stream_t<__nv_bfloat16>(p, L, max_chunks, bulk, s);
}
Status launch_output_stream_fp16(const OutputParams& p, const SeqLayout& L, int64_t max_chunks, bool bulk,
                                 cudaStream_t s) {
  return launch_output_stream_t<__half>(p, L, max_chunks, bulk, s);
}
}  // namespace attnkit::gdn_cuda
