// Timings of the portable CUDA attention kernels on the shapes of /work/shared/anchors (FA2 / cuDNN
// figures there): prefill TFLOP/s and decode KV bandwidth. Median of CUDA-event timings after a
// warm-up, with the L2 cache flushed before every repeat (as triton's do_bench does for the anchors),
// random inputs. Prints a table; not a test.
//   portable_attn_bench [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attnkit/attention.h"
#include "testkit/buffer.h"

using namespace attnkit;

#define CK(call)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));         \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

// Non-zero pseudo-random contents without a host pass over gigabytes: a random 8 MiB block
// copied over the whole buffer.
void fill_random(testkit::Buffer& b, uint64_t seed) {
  testkit::Buffer block(b.dtype(), {int64_t{4} << 20});
  std::mt19937_64 rng(seed);
  testkit::fill_normal(block, rng);
  const size_t n = b.bytes();
  for (size_t off = 0; off < n; off += block.bytes())
    CK(cudaMemcpy(static_cast<char*>(b.data()) + off, block.data(), std::min(block.bytes(), n - off),
                  cudaMemcpyHostToDevice));
}

struct Timer {
  void* flush = nullptr;
  size_t flush_bytes = size_t{256} << 20;
  cudaEvent_t a, b;
  Timer() {
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  template <class F>
  double median_ms(F&& f, int reps) {
    for (int i = 0; i < 3; ++i) f();
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

void prefill(Timer& tm, int reps, int b, int s, int h, int d, bool causal) {
  const Device g = cuda();
  testkit::Buffer q(DType::kBFloat16, {b, s, h, d}, g), k(DType::kBFloat16, {b, s, h, d}, g),
      v(DType::kBFloat16, {b, s, h, d}, g), o(DType::kBFloat16, {b, s, h, d}, g);
  fill_random(q, 1);
  fill_random(k, 2);
  fill_random(v, 3);
  AttentionArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.o = o.view();
  if (causal) a.mask = Mask::causal();
  ExecOptions opts;
  opts.backend = Backend::kCudaPortable;
  AttentionPlan plan;
  check(plan_attention(a, opts, &plan), "plan");
  const double ms = tm.median_ms([&] { check(attention_forward(a, opts, &plan), "run"); }, reps);
  const double pairs = causal ? double(s) * (s + 1) / 2 : double(s) * s;
  const double tflops = 4.0 * pairs * d * h * b / (ms * 1e-3) / 1e12;
  std::printf("prefill  b=%-3d s=%-5d h=%-2d d=%-3d %-7s %9.4f ms %7.1f TFLOP/s  %s\n", b, s, h, d,
              causal ? "causal" : "full", ms, tflops, plan.kernel.c_str());
}

void decode(Timer& tm, int reps, int b, int len, int page, int splits) {
  const int hq = 32, hkv = 8, d = 128;
  const Device g = cuda();
  testkit::Buffer q(DType::kBFloat16, {b, 1, hq, d}, g), o(DType::kBFloat16, {b, 1, hq, d}, g);
  fill_random(q, 4);
  testkit::Buffer k, v, table, used;
  AttentionArgs a;
  if (page == 0) {
    k = testkit::Buffer(DType::kBFloat16, {b, len, hkv, d}, g);
    v = testkit::Buffer(DType::kBFloat16, {b, len, hkv, d}, g);
  } else {
    const int per = (len + page - 1) / page, pages = per * b;
    k = testkit::Buffer(DType::kBFloat16, {pages, page, hkv, d}, g);
    v = testkit::Buffer(DType::kBFloat16, {pages, page, hkv, d}, g);
    std::vector<int32_t> ids(pages);
    for (int i = 0; i < pages; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(5));
    table = testkit::Buffer(DType::kInt32, {b, per}, g);
    table.from_int(ids);
    used = testkit::Buffer(DType::kInt32, {b}, g);
    used.from_int(std::vector<int32_t>(b, len));
    a.page_table = table.view();
    a.seqused_k = used.view();
    a.max_seqlen_k = len;
  }
  fill_random(k, 6);
  fill_random(v, 7);
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.o = o.view();
  a.num_splits = splits;
  ExecOptions opts;
  opts.backend = Backend::kCudaPortable;
  AttentionPlan plan;
  check(plan_attention(a, opts, &plan), "plan");
  // Workspace given up front, as a serving loop would.
  void* ws = nullptr;
  if (plan.workspace_bytes) CK(cudaMalloc(&ws, plan.workspace_bytes));
  opts.workspace = ws;
  opts.workspace_bytes = plan.workspace_bytes;
  const double ms = tm.median_ms([&] { check(attention_forward(a, opts, &plan), "run"); }, reps);
  const double bytes = 2.0 * b * len * hkv * d * 2;
  std::printf("decode   b=%-3d L=%-6d %-8s splits=%-3d %9.4f ms %7.1f GB/s  %s\n", b, len,
              page ? ("page" + std::to_string(page)).c_str() : "contig", plan.num_splits, ms,
              bytes / (ms * 1e-3) / 1e9, plan.kernel.c_str());
  if (ws) CK(cudaFree(ws));
}

}  // namespace

int main(int argc, char** argv) {
  if (!testkit::cuda_available()) {
    std::printf("no CUDA device\n");
    return 77;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  std::printf("device: %s\n", testkit::cuda_device_name().c_str());
  Timer tm;
  for (bool causal : {false, true}) {
    prefill(tm, reps, 4, 4096, 16, 128, causal);
    prefill(tm, reps, 2, 8192, 16, 128, causal);
  }
  prefill(tm, reps, 8, 2048, 16, 64, false);
  prefill(tm, reps, 4, 4096, 16, 256, false);
  for (int page : {0, 16, 64}) {
    decode(tm, reps, 1, 8192, page, 0);
    decode(tm, reps, 16, 8192, page, 0);
  }
  decode(tm, reps, 1, 32768, 0, 0);
  decode(tm, reps, 64, 8192, 0, 0);
  return 0;
}
