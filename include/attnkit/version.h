#pragma once

namespace attnkit {
// Whether this build contains CUDA kernels, and for which architectures (e.g. "90a").
bool built_with_cuda();
const char* cuda_architectures();
// Which attention kernels the build compiles: "all", or what its kernel filter keeps (CMake's
// ATTNKIT_KERNEL_HEAD_DIMS / ATTNKIT_KERNEL_DTYPES), e.g. "head dims 128, dtypes bf16".
const char* kernel_filter();
const char* version();
}  // namespace attnkit
