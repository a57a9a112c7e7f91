// The one place the API layer touches device memory: copying small index tensors back for
// validation. Implemented by the CUDA backend, or by a stub that reports "no CUDA in this build".
#pragma once

#include <cstddef>

#include "attnkit/status.h"

namespace attnkit::detail {
Status copy_device_to_host(void* dst, const void* src, size_t bytes, int device, void* stream);
}
