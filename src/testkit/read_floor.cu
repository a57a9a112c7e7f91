#include "testkit/read_floor.h"

#include <cuda_runtime.h>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/common/cuda_check.h"

namespace attnkit::testkit {
namespace {

constexpr int kMaxSpans = 4;
constexpr int kThreads = 512;
// Independent 16-byte loads a thread has in flight: 2048 threads an SM x 8 x 16 B = 256 KB, more
// than DRAM latency times an SM's share of the bandwidth needs.
constexpr int kUnroll = 8;

struct Spans {
  const uint4* p[kMaxSpans];
  size_t n[kMaxSpans];  // 16-byte words
  int per[kMaxSpans];   // loads per thread per tile, 1..kUnroll: a small span still spans the grid
  int count;
};

// XOR of every word read; stored only in the (practically never) case that it equals the magic
// value, so that the loads cannot be removed and nothing is written. Each CTA reads whole tiles of
// kThreads x per words (a thread's loads land kThreads words apart, so a warp's loads are 512
// contiguous bytes and a tile is one contiguous run), the grid striding over the tiles.
template <ReadHint kHint>
__global__ void __launch_bounds__(kThreads) read_once_kernel(const __grid_constant__ Spans s,
                                                             unsigned* sink) {
  uint32_t x = 0;
  for (int k = 0; k < s.count; ++k) {
    const uint4* p = s.p[k];
    const size_t n = s.n[k];
    const int per = s.per[k];
    const size_t tile = size_t{kThreads} * per;
    for (size_t base = blockIdx.x * tile; base < n; base += gridDim.x * tile) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + u * kThreads + threadIdx.x;
        v[u] = make_uint4(0, 0, 0, 0);
        if (u < per && i < n) v[u] = kHint == ReadHint::kEvictFirst ? __ldcs(p + i) : p[i];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  if (x == 0x9e3779b9u) *sink = x;
}

// The bulk reader: each CTA's single thread streams its chunks (chunk c of the concatenated spans
// goes to CTA c % grid) through a ring of kRing slots of kChunk bytes, one bulk copy per chunk, and
// waits on a slot only when it comes round again: the whole ring stays in flight.
constexpr int kChunk = 16 * 1024;
constexpr int kRing = 12;  // 192 KB of the 227 KB an sm_90 block may have

__global__ void __launch_bounds__(32, 1) read_bulk_kernel(const __grid_constant__ Spans s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Bar = cutlass::arch::ClusterTransactionBarrier;
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ uint64_t full[kRing];
  if (threadIdx.x != 0) return;
  for (int r = 0; r < kRing; ++r) Bar::init(&full[r], 1);
  cutlass::arch::fence_barrier_init();
  int64_t issued = 0;
  for (int k = 0; k < s.count; ++k) {
    const char* base = reinterpret_cast<const char*>(s.p[k]);
    const int64_t bytes = static_cast<int64_t>(s.n[k]) * 16;
    const int64_t chunks = (bytes + kChunk - 1) / kChunk;
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x, ++issued) {
      const int slot = static_cast<int>(issued % kRing);
      if (issued >= kRing) Bar::wait(&full[slot], static_cast<uint32_t>((issued / kRing - 1) & 1));
      const int len = static_cast<int>(min(int64_t{kChunk}, bytes - c * kChunk));
      Bar::arrive_and_expect_tx(&full[slot], static_cast<uint32_t>(len));
      cute::SM90_BULK_COPY_G2S::copy(base + c * kChunk, &full[slot], ring + slot * kChunk, len);
    }
  }
  // Every copy lands before the CTA exits.
  for (int64_t i = issued > kRing ? issued - kRing : 0; i < issued; ++i)
    Bar::wait(&full[i % kRing], static_cast<uint32_t>((i / kRing) & 1));
#endif
}

// The spans as the kernels take them; `fn` names the caller in the refusals.
Status to_spans(const std::vector<ReadSpan>& spans, const char* fn, Spans* s) {
  if (spans.size() > kMaxSpans) return Status::Invalid(std::string(fn) + ": at most 4 spans");
  s->count = static_cast<int>(spans.size());
  for (int k = 0; k < s->count; ++k) {
    if (reinterpret_cast<uintptr_t>(spans[k].data) % 16 != 0 || spans[k].bytes % 16 != 0)
      return Status::Invalid(std::string(fn) + ": spans must be 16-byte aligned and sized");
    s->p[k] = static_cast<const uint4*>(spans[k].data);
    s->n[k] = spans[k].bytes / 16;
  }
  return Status::Ok();
}

}  // namespace

Status read_once_bulk(const std::vector<ReadSpan>& spans) {
  Spans s{};
  ATTNKIT_RETURN_IF_ERROR(to_spans(spans, "read_once_bulk", &s));
  constexpr int kSmem = kRing * kChunk;
  static int grid = 0;  // found once for the process, as in read_once
  if (grid == 0) {
    int dev = 0, sms = 0, major = 0;
    ATTNKIT_CUDA_TRY(cudaGetDevice(&dev));
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 9) return Status::Unsupported("read_once_bulk needs sm_90 or newer");
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(read_bulk_kernel,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    grid = sms;
  }
  read_bulk_kernel<<<grid, 32, kSmem>>>(s);
  ATTNKIT_CUDA_CHECK_LAUNCH("read_bulk_kernel");
  return Status::Ok();
}

Status read_once(const std::vector<ReadSpan>& spans, ReadHint hint) {
  Spans s{};
  ATTNKIT_RETURN_IF_ERROR(to_spans(spans, "read_once", &s));
  // Found once for the process (the benchmark times one device): the call is timed, so no device
  // queries inside it.
  static int grid = 0;
  static unsigned* sink = nullptr;
  if (grid == 0) {
    int dev = 0, sms = 0, per_sm = 0;
    ATTNKIT_CUDA_TRY(cudaGetDevice(&dev));
    ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ATTNKIT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, read_once_kernel<ReadHint::kEvictFirst>, kThreads, 0));
    ATTNKIT_CUDA_TRY(cudaMalloc(&sink, sizeof(unsigned)));
    grid = sms * (per_sm > 0 ? per_sm : 1);
  }
  const size_t threads = size_t{kThreads} * grid;
  for (int k = 0; k < s.count; ++k) {
    const size_t per = (s.n[k] + threads - 1) / threads;
    s.per[k] = static_cast<int>(std::clamp<size_t>(per, 1, kUnroll));
  }
  if (hint == ReadHint::kEvictFirst)
    read_once_kernel<ReadHint::kEvictFirst><<<grid, kThreads>>>(s, sink);
  else
    read_once_kernel<ReadHint::kNormal><<<grid, kThreads>>>(s, sink);
  ATTNKIT_CUDA_CHECK_LAUNCH("read_once_kernel");
  return Status::Ok();
}

}  // namespace attnkit::testkit
