// Probe: does compute-sanitizer racecheck track __syncthreads() correctly in a kernel that also
// uses a named barrier over part of the block? Run it under racecheck, one mode per run:
//   compute-sanitizer --tool racecheck build-gpu/experiments/racecheck_probe <mode>
// Every shared-memory access below is ordered by a block-wide barrier, so any hazard racecheck
// reports is a false positive. Modes: the first warpgroup (threads 0-127) copies its own slot of
// `a` into `t` with no named barrier (0), or behind a 128-thread named barrier that orders nothing
// (3), or copies another warp's slot behind the named barrier, which orders that read (1: the
// non-aligned barrier.sync, 2: the aligned bar.sync). The loop mirrors the Gated DeltaNet intra
// kernel: gates read by the second warpgroup, a product stage, its reads, the next gates.
// H100, CUDA 13.0 (bench/RESULTS.md, 2026-11-27 session 14): mode 0 reports no hazard; modes 1, 2
// and 3 report three, on the same accesses in each. So the hazards racecheck reports for kernels
// that mix the two (the mma.sync Gated DeltaNet state/output kernel; since session 19 also the
// sm90 intra kernel, whose inverse syncs one warpgroup) are not evidence of a race.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "bench/cuda_exit.h"

namespace {

__global__ void probe_kernel(float* out, int mode, int iters) {
  __shared__ float g[64], a[128], t[128], t2[256];
  const int tid = threadIdx.x;
  if (tid < 64) g[tid] = 0.5f * tid;
  __syncthreads();
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    if (tid < 128) {
      a[tid] = g[tid & 63] + it;
      if (mode == 1 || mode == 3) asm volatile("barrier.sync 1, 128;\n" ::: "memory");
      if (mode == 2) asm volatile("bar.sync 1, 128;\n" ::: "memory");
      t[tid] = (mode == 1 || mode == 2) ? a[127 - tid] : a[tid];
    } else {
      acc += g[(tid * 5) & 63];
    }
    __syncthreads();
    t2[tid] = 2.f * t[(tid * 3) & 127];
    __syncthreads();
    acc += t2[(tid * 7) & 255];
    __syncthreads();
    if (tid < 64) g[tid] += acc;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + tid] = acc;
}

}  // namespace

int main(int argc, char** argv) {
  const int mode = argc > 1 ? std::atoi(argv[1]) : 1;
  if (mode < 0 || mode > 3) {
    std::fprintf(stderr, "usage: racecheck_probe [0|1|2|3]\n");
    return 2;
  }
  float* out = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&out, 4 * 256 * sizeof(float)));
  probe_kernel<<<4, 256>>>(out, mode, 3);
  BENCH_CUDA_CHECK(cudaGetLastError());
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  BENCH_CUDA_CHECK(cudaFree(out));
  std::printf("racecheck_probe mode %d ran\n", mode);
  return 0;
}
