// The few CUDA runtime calls the attnkit program makes itself (device facts, raw copies), behind
// plain functions so that the commands build the same with or without CUDA. (Event timing is
// testkit/timing.h, shared with bench/gdn_bench.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "attnkit/status.h"

namespace attnkit::cli::gpu {

struct DeviceFacts {
  std::string name;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  int64_t l2_bytes = 0, memory_bytes = 0;
  int driver_version = 0, runtime_version = 0;
};

// False (with the reason in *why) in a CPU-only build or where no CUDA device is usable.
bool device_facts(DeviceFacts* facts, std::string* why);

// Copies host bytes to a CUDA device address (plain memcpy in a CPU-only build).
Status copy_from_host(void* dst, const void* src, size_t bytes);
Status synchronize();
// After a CUDA error: false when the context is unusable (a sticky error such as an illegal
// address), so that no later allocation aborts the program.
bool context_usable();

}  // namespace attnkit::cli::gpu
