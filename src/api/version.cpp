#include "attnkit/version.h"

#include "cuda/instantiations/kernel_filter.h"

namespace attnkit {
bool built_with_cuda() {
#ifdef ATTNKIT_WITH_CUDA
  return true;
#else
  return false;
#endif
}
const char* cuda_architectures() { return ATTNKIT_CUDA_ARCHS; }
const char* kernel_filter() {
  return ATTNKIT_KERNEL_FILTER[0] != '\0' ? ATTNKIT_KERNEL_FILTER : "all";
}
const char* version() { return ATTNKIT_VERSION; }
}  // namespace attnkit
