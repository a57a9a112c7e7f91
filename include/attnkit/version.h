#pragma once

namespace attnkit {
// Whether this build contains CUDA kernels, and for which architectures (e.g. "90a").
bool built_with_cuda();
const char* cuda_architectures();
const char* version();
}  // namespace attnkit
