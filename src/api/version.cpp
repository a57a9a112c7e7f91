#include "attnkit/version.h"

namespace attnkit {
bool built_with_cuda() {
#ifdef ATTNKIT_WITH_CUDA
  return true;
#else
  return false;
#endif
}
const char* cuda_architectures() { return ATTNKIT_CUDA_ARCHS; }
const char* version() { return ATTNKIT_VERSION; }
}  // namespace attnkit
