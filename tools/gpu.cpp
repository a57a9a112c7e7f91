#include "gpu.h"

#include <cstring>

#ifdef ATTNKIT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace attnkit::cli::gpu {

#ifdef ATTNKIT_WITH_CUDA
namespace {
Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Cuda(std::string(what) + " failed: " + cudaGetErrorString(e));
}
}  // namespace

bool device_facts(DeviceFacts* f, std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    if (why) *why = "cudaGetDeviceProperties failed";
    return false;
  }
  f->name = p.name;
  f->cc_major = p.major;
  f->cc_minor = p.minor;
  f->sm_count = p.multiProcessorCount;
  f->l2_bytes = p.l2CacheSize;
  f->memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  cudaDriverGetVersion(&f->driver_version);
  cudaRuntimeGetVersion(&f->runtime_version);
  return true;
}

Status copy_from_host(void* dst, const void* src, size_t bytes) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

Status synchronize() { return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

bool context_usable() {
  cudaGetLastError();  // clears non-sticky errors; a sticky one is returned again below
  void* p = nullptr;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMalloc(&p, 256) != cudaSuccess) return false;
  return cudaFree(p) == cudaSuccess;
}

Status time_with_events(const std::function<Status(int)>& fn, int warmup, int repeats,
                        std::vector<double>* ms) {
  ms->clear();
  int call = 0;
  for (int i = 0; i < warmup; ++i) ATTNKIT_RETURN_IF_ERROR(fn(call++));
  // The anchors are timed by triton.testing.do_bench, which writes zeros over a 256 MB buffer
  // before each call and puts the event pair around the call alone. attnkit is timed the same
  // way: each call starts with L2 full of other, dirty lines that must be written back as it
  // reads, and with the GPU busy up to its start, so neither side's host cost shows. (Timing
  // calls back to back instead measured a b1 x 8k decode 21% faster than this, and would let
  // PyTorch's host cost per call exceed a small kernel's GPU time: not a like-for-like ratio.)
  constexpr size_t kFlushBytes = size_t{256} * 1000 * 1000;
  void* flush = nullptr;
  Status st = check(cudaMalloc(&flush, kFlushBytes), "cudaMalloc (L2 flush buffer)");
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(repeats));
  size_t made = 0;
  for (; st.ok() && made < ev.size(); ++made) {
    st = check(cudaEventCreate(&ev[made]), "cudaEventCreate");
    if (!st.ok()) break;
  }
  for (int r = 0; st.ok() && r < repeats; ++r) {
    st = check(cudaMemsetAsync(flush, 0, kFlushBytes, nullptr), "cudaMemsetAsync (L2 flush)");
    if (st.ok()) st = check(cudaEventRecord(ev[2 * r], nullptr), "cudaEventRecord");
    if (st.ok()) st = fn(call++);
    if (st.ok()) st = check(cudaEventRecord(ev[2 * r + 1], nullptr), "cudaEventRecord");
  }
  if (st.ok()) st = synchronize();
  for (int r = 0; st.ok() && r < repeats; ++r) {
    float t = 0;
    st = check(cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]), "cudaEventElapsedTime");
    ms->push_back(t);
  }
  for (size_t i = 0; i < made; ++i) cudaEventDestroy(ev[i]);
  if (flush != nullptr) cudaFree(flush);
  return st;
}

#else  // CPU-only build

bool device_facts(DeviceFacts*, std::string* why) {
  if (why) *why = "this attnkit build has no CUDA support";
  return false;
}

Status copy_from_host(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::Ok();
}

Status synchronize() { return Status::Ok(); }

bool context_usable() { return true; }

Status time_with_events(const std::function<Status(int)>&, int, int, std::vector<double>*) {
  return Status::Unsupported("this attnkit build has no CUDA support");
}

#endif

}  // namespace attnkit::cli::gpu
