// Bulk (TMA engine) global -> shared copies completing on an mbarrier, sm_90. The streaming
// kernels (chunk output, decode ring) use them for whole 16-byte-aligned rows: the copy engine
// keeps far more bytes in flight per SM than per-thread cp.async / ld.global do, which is what
// bounds a memory-bound kernel's rate once every SM has work.
#pragma once

#include <cstdint>

namespace attnkit::gdn_cuda {

// The PTX below exists from sm_90 on; other archs get traps (the launchers pick these kernels only
// on sm_90 devices of builds with sm_90a code).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define ATTNKIT_GDN_BULK_OR_TRAP(...) __trap()
#else
#define ATTNKIT_GDN_BULK_OR_TRAP(...) __VA_ARGS__
#endif

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Initialise with one expected arrival per phase; make it visible to the copy engine (and, after
// the caller's __syncthreads, to every thread) before first use.
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  ATTNKIT_GDN_BULK_OR_TRAP(asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar))));
  ATTNKIT_GDN_BULK_OR_TRAP(asm volatile("fence.mbarrier_init.release.cluster;\n" ::));
}

// The phase's one arrival, announcing `bytes` of copies that complete on it (0: the phase ends
// once those already announced, none here, are done).
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, uint32_t bytes) {
  ATTNKIT_GDN_BULK_OR_TRAP(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory"));
}

// Waits until the phase of the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const unsigned a = smem_u32(bar);
  uint32_t done = 0;
  while (!done) {
    ATTNKIT_GDN_BULK_OR_TRAP(asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory"));
  }
}

// Orders this thread's earlier generic-proxy accesses of shared memory before its later bulk
// copies into it (buffers are refilled after they were read by ordinary loads).
__device__ __forceinline__ void fence_proxy_async_smem() {
  ATTNKIT_GDN_BULK_OR_TRAP(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared, completing on
// `bar`.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  ATTNKIT_GDN_BULK_OR_TRAP(asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory"));
}

}  // namespace attnkit::gdn_cuda
