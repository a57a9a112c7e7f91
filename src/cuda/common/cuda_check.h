// Error checking for CUDA calls inside attnkit: every runtime call and every launch is checked and
// turned into a Status naming the call site.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "attnkit/status.h"

namespace attnkit::detail {

inline Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Cuda(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace attnkit::detail

// Returns a CUDA error Status from the enclosing function if `call` fails.
#define ATTNKIT_CUDA_TRY(call)                                                                 \
  do {                                                                                         \
    cudaError_t _attnkit_err = (call);                                                         \
    if (_attnkit_err != cudaSuccess)                                                           \
      return ::attnkit::detail::cuda_status(_attnkit_err, #call, __FILE__, __LINE__);          \
  } while (0)

// Checks the last launch error (use right after every kernel<<<>>>).
#define ATTNKIT_CUDA_CHECK_LAUNCH(name) ATTNKIT_CUDA_TRY(cudaGetLastError())
