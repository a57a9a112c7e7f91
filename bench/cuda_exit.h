// The bench programs' CUDA check: a failing runtime call prints what failed and ends the program
// (a benchmark has nothing to recover; the library itself returns a Status instead).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define BENCH_CUDA_CHECK(call)                                                         \
  do {                                                                                 \
    cudaError_t bench_err_ = (call);                                                   \
    if (bench_err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(bench_err_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
