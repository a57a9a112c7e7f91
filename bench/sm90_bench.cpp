// Hopper prefill timings on the FlashAttention-3 paper shapes: head dim 128, bf16, 16 heads,
// batch x seqlen = 16k, seqlen 512..16k, without and with the causal mask. Prints TFLOP/s
// (4·Sq·Sk·D per head, halved for causal) from the median of CUDA-event timings after warm-up;
// random inputs. A table, not a test.
//   sm90_bench [--backend sm90|portable|auto] [--reps N] [--dim D]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnkit/attention.h"
#include "testkit/buffer.h"

using namespace attnkit;

#define CK(call)                                                              \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

namespace {

// Random contents without a host pass over the whole buffer: a random block copied repeatedly.
void fill_random(testkit::Buffer& b, uint64_t seed) {
  testkit::Buffer block(b.dtype(), {int64_t{1} << 20});
  std::mt19937_64 rng(seed);
  testkit::fill_normal(block, rng);
  const size_t n = b.bytes();
  for (size_t off = 0; off < n; off += block.bytes())
    CK(cudaMemcpy(static_cast<char*>(b.data()) + off, block.data(), std::min(block.bytes(), n - off),
                  cudaMemcpyHostToDevice));
}

}  // namespace

int main(int argc, char** argv) {
  Backend backend = Backend::kCudaSm90;
  int reps = 30, dim = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--backend") {
      backend = v == "portable" ? Backend::kCudaPortable : v == "auto" ? Backend::kAuto : Backend::kCudaSm90;
    } else if (k == "--reps") {
      reps = std::atoi(v.c_str());
    } else if (k == "--dim") {
      dim = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (!testkit::cuda_available()) {
    std::printf("no CUDA device\n");
    return 77;
  }
  std::printf("device: %s, backend %s, head dim %d, bf16, 16 heads, batch*seqlen = 16384\n",
              testkit::cuda_device_name().c_str(), to_string(backend), dim);
  std::printf("%-8s %-6s %-7s %-28s %10s %10s\n", "seqlen", "batch", "causal", "kernel", "ms",
              "TFLOP/s");
  const int heads = 16;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int seqlen = 512; seqlen <= 16384; seqlen *= 2) {
    const int batch = 16384 / seqlen;
    const std::vector<int64_t> shape{batch, seqlen, heads, dim};
    testkit::Buffer q(DType::kBFloat16, shape, cuda()), k(DType::kBFloat16, shape, cuda()),
        v(DType::kBFloat16, shape, cuda()), o(DType::kBFloat16, shape, cuda()),
        lse(DType::kFloat32, {batch, seqlen, heads}, cuda());
    fill_random(q, 1);
    fill_random(k, 2);
    fill_random(v, 3);
    for (bool causal : {false, true}) {
      AttentionArgs a;
      a.q = q.view();
      a.k = k.view();
      a.v = v.view();
      a.o = o.view();
      a.lse = lse.view();
      a.mask = causal ? Mask::causal() : Mask::none();
      ExecOptions opts;
      opts.backend = backend;
      AttentionPlan plan;
      Status st = plan_attention(a, opts, &plan);
      if (!st.ok()) {
        std::printf("%-8d %-6d %-7s plan failed: %s\n", seqlen, batch, causal ? "yes" : "no",
                    st.message().c_str());
        continue;
      }
      for (int i = 0; i < 3; ++i) {
        st = attention_forward(a, opts, &plan);
        if (!st.ok()) {
          std::fprintf(stderr, "run failed: %s\n", st.message().c_str());
          return 1;
        }
      }
      CK(cudaDeviceSynchronize());
      std::vector<float> ms;
      for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(e0));
        st = attention_forward(a, opts, &plan);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        if (!st.ok()) {
          std::fprintf(stderr, "run failed: %s\n", st.message().c_str());
          return 1;
        }
        float t = 0.f;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      double flops = 4.0 * seqlen * double(seqlen) * dim * heads * batch;
      if (causal) flops /= 2;
      std::printf("%-8d %-6d %-7s %-28s %10.3f %10.1f\n", seqlen, batch, causal ? "yes" : "no",
                  plan.kernel.c_str(), med, flops / (med * 1e-3) / 1e12);
    }
  }
  return 0;
}
