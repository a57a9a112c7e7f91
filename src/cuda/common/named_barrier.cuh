// Named barriers in their non-aligned PTX form (barrier.sync / barrier.arrive), for kernels whose
// warps meet at a named barrier from different instructions: two warpgroups each on its own code
// path. The aligned forms (bar.sync, bar.arrive, __syncthreads) leave that undefined in PTX, and
// compute-sanitizer synccheck reports it as "divergent threads in block".
#pragma once

namespace attnkit::gpu {

// Waits until `threads` threads (a multiple of 32) have arrived at barrier `id`, this one included.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Counts this thread towards barrier `id` of `threads` threads without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace attnkit::gpu
