// Execution options shared by every op: which backend runs it, on which stream, with which
// scratch memory.
#pragma once

#include <cstddef>

namespace attnkit {

enum class Backend : unsigned char {
  kAuto,          // the fastest kernel that serves the request on the tensors' device
  kCPU,           // the reference backend (host tensors)
  kCudaPortable,  // sm_80+ mma.sync / cp.async kernels
  kCudaSm90,      // Hopper TMA + WGMMA kernels
};

const char* to_string(Backend b);

struct ExecOptions {
  Backend backend = Backend::kAuto;
  // cudaStream_t for CUDA backends (nullptr = the legacy default stream). Entry points enqueue work
  // on it and never synchronize it.
  void* stream = nullptr;
  // Scratch device memory for ops that need it (split-KV partials). If the plan needs more than is
  // given here, the op allocates stream-ordered (cudaMallocAsync) and frees it after; both are
  // legal under CUDA graph capture.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Index tensors on a CUDA device (cu_seqlens, page tables, state indices) are not read by the host
  // unless this is set: then they are copied back and validated, which synchronizes the stream.
  // Without it, kernels clamp every index so nothing is read or written out of bounds.
  bool validate_device_indices = false;
  // CPU backend: worker threads (0 = hardware concurrency).
  int cpu_threads = 0;
};

}  // namespace attnkit
