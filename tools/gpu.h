// The few CUDA runtime calls the attnkit program makes itself (device facts, event timing, raw
// copies), behind plain functions so that the commands build the same with or without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// Runs fn `warmup` times, then `repeats` times, each timed with a pair of CUDA events on the
// default stream after 256 MB of zeros were written to a scratch buffer (the method of
// triton.testing.do_bench, which times the anchors); per-call milliseconds go to *ms. Stops at the
// first failing call.
Status time_with_events(const std::function<Status(int)>& fn, int warmup, int repeats,
                        std::vector<double>* ms);

}  // namespace attnkit::cli::gpu
