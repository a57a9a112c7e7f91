// Built when attnkit has no CUDA backend.
#include "api/device_copy.h"

namespace attnkit::detail {
Status copy_device_to_host(void*, const void*, size_t, int, void*) {
  return Status::Unsupported("this attnkit build has no CUDA support; tensors must be on the CPU");
}
}  // namespace attnkit::detail
