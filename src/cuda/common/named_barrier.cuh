// Named barriers, mostly in their non-aligned PTX form (barrier.sync / barrier.arrive), for kernels
// whose warps meet at a named barrier from different instructions: two warpgroups each on its own
// code path. The aligned forms (bar.sync, bar.arrive, __syncthreads) leave that undefined in PTX, and
// compute-sanitizer synccheck reports it as "divergent threads in block".
#pragma once

namespace attnkit::gpu {

// Waits until `threads` threads (a multiple of 32) have arrived at barrier `id`, this one included.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// The aligned form (bar.sync), for call sites that every thread of each arriving warp reaches at
// the same instruction (no divergence within a warp): it states that contract, which synccheck then
// checks. Not faster: measured against barrier.sync in the Gated DeltaNet inverse
// (gdn_invert_tc.cuh).
__device__ __forceinline__ void named_barrier_sync_aligned(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Counts this thread towards barrier `id` of `threads` threads without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace attnkit::gpu
