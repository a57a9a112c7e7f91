// Probe: what the L2 flush before each timed call does to a short memory-bound call. Times one
// read of N bytes (testkit's read floor kernel, through its public entry) after three kinds of
// flush: the method's (256 MB written: L2 is left full of dirty lines, which must be written back
// as the call's reads evict them), 256 MB read (L2 left full of clean lines), and none (the call
// right after the previous one, its inputs rotated so that they are not in L2); the read's loads
// evict-first (testkit's default) and, after the method's flush, also with normal caching.
// Prints one row per size: milliseconds and GB/s of the bytes read, for each case.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/cuda_exit.h"
#include "testkit/read_floor.h"

namespace {

enum class Flush { kWrite, kRead, kNone };
struct Case {
  Flush flush;
  attnkit::testkit::ReadHint hint;
};

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  using attnkit::testkit::read_once;
  constexpr size_t kFlush = size_t{256} << 20;
  constexpr int kRepeats = 41;
  void* flush = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&flush, kFlush));
  BENCH_CUDA_CHECK(cudaMemset(flush, 1, kFlush));
  cudaDeviceProp prop;
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("flush_probe on %s (L2 %d MB)\n", prop.name, prop.l2CacheSize >> 20);
  std::printf("%10s | %-24s | %-24s | %-24s | %-24s\n", "MiB read", "after 256 MB written",
              "after 256 MB read", "no flush (rotated)", "written, normal loads");
  cudaEvent_t e0, e1;
  BENCH_CUDA_CHECK(cudaEventCreate(&e0));
  BENCH_CUDA_CHECK(cudaEventCreate(&e1));
  for (size_t mb : {4, 16, 34, 67, 134, 268}) {
    const size_t bytes = mb << 20;
    // Enough sets to cover 3x L2, so that a set is never found in L2 from its last use.
    const size_t n_sets = std::max<size_t>(3, (3 * size_t(prop.l2CacheSize) + bytes - 1) / bytes);
    std::vector<void*> sets(n_sets);
    for (auto& p : sets) {
      BENCH_CUDA_CHECK(cudaMalloc(&p, bytes));
      BENCH_CUDA_CHECK(cudaMemset(p, 3, bytes));
    }
    std::printf("%10zu", mb);
    using attnkit::testkit::ReadHint;
    for (Case c : {Case{Flush::kWrite, ReadHint::kEvictFirst}, Case{Flush::kRead, ReadHint::kEvictFirst},
                   Case{Flush::kNone, ReadHint::kEvictFirst},
                   Case{Flush::kWrite, ReadHint::kNormal}}) {
      const Flush fl = c.flush;
      std::vector<float> ms;
      for (int r = 0; r < kRepeats + 3; ++r) {
        if (fl == Flush::kWrite) BENCH_CUDA_CHECK(cudaMemsetAsync(flush, 0, kFlush));
        if (fl == Flush::kRead && !read_once({{flush, kFlush}}).ok()) return 1;
        BENCH_CUDA_CHECK(cudaEventRecord(e0));
        if (!read_once({{sets[r % n_sets], bytes}}, c.hint).ok()) return 1;
        BENCH_CUDA_CHECK(cudaEventRecord(e1));
        BENCH_CUDA_CHECK(cudaEventSynchronize(e1));
        float t = 0;
        BENCH_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        if (r >= 3) ms.push_back(t);
      }
      const double m = median(ms);
      std::printf(" | %9.4f ms %7.0f GB/s", m, bytes / m / 1e6);
    }
    std::printf("\n");
    for (void* p : sets) BENCH_CUDA_CHECK(cudaFree(p));
  }
  BENCH_CUDA_CHECK(cudaFree(flush));
  return 0;
}
