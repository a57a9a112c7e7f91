// Gated DeltaNet GPU timings (prints a table): the decode step against state bytes moved, the
// chunk-output stage against the bytes it must move, the whole chunked forward, and a
// device-to-device copy as the bandwidth ceiling. Shapes follow the fla anchors (Qwen3-Next's
// linear-attention layers: H = 16, HV = 32, K = V = 128, bf16). Median of many event-timed runs,
// each after a 256 MB L2 flush as `attnkit bench` times (time_ms), and back to back beside it;
// GB/s columns also as a share of the copy measured in the same run.
// The per-stage columns time the public stage ops (gdn_kkt_inverse, gdn_state_pass writing h and
// V_new, gdn_chunk_output reading them); the forward itself runs the fused intra kernel and the
// fused state/output kernel, which a profiler times (e.g. ncu -k regex:'intra|state_output'). Each
// forward row also times the forward with the mma.sync kernels (detail::GdnKernels::mma_sync), what
// GPUs other than sm_90 run, and with only the intra stage on mma.sync (::mma_sync_intra), beside
// the default (WGMMA/TMA on sm_90).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "api/gdn_backends.h"
#include "attnkit/gdn.h"
#include "cuda_exit.h"
#include "testkit/buffer.h"
#include "testkit/timing.h"

using namespace attnkit;
using testkit::Buffer;

namespace {

// The forward and the chunk-output stage with their CUDA kernels chosen instead of by the library.
Status forward_with(const GdnChunkArgs& a, const detail::GdnKernels& k) {
  return detail::gdn_chunk_forward_with(a, {}, k);
}
Status output_with(const GdnOutputArgs& a, const detail::GdnKernels& k) {
  return detail::gdn_chunk_output_with(a, {}, k);
}

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

// Median of `reps` event-timed calls (testkit/timing.h, as `attnkit bench` times): with flush, each
// call after a 256 MB L2 flush, the method of the anchors; without, queued back to back (warm L2,
// no host gaps; before session 7 this program synchronised after each such call instead, so the
// GPU idled while the host prepared the next one).
double time_ms(const std::function<void()>& fn, int reps = 50, bool flush = true) {
  std::vector<double> t;
  check(testkit::time_calls([&](int) { fn(); return Status::Ok(); }, 5, reps,
                            flush ? testkit::Flush::kL2 : testkit::Flush::kNone, &t),
        "timing");
  return testkit::median_ms(t);
}

Buffer dev_normal(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, float sd = 1.f) {
  Buffer b(dt, std::move(shape), cuda(0));
  testkit::fill_normal(b, rng, 0.f, sd);
  return b;
}
Buffer dev_uniform(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, float lo, float hi) {
  Buffer b(dt, std::move(shape), cuda(0));
  testkit::fill_uniform(b, rng, lo, hi);
  return b;
}

constexpr int64_t H = 16, HV = 32, D = 128;

}  // namespace

// Arguments, if any, name the forward cases to run (e.g. `gdn_bench B1_T16k`) and, with `decode`,
// the decode rows (`decode-sweep`: more batches), with `copy` the copy; whatever is not named is
// left out: a profiler run sees only the kernels of those cases.
int main(int argc, char** argv) {
  std::vector<std::string> only(argv + 1, argv + argc);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured, even when piped
  if (!testkit::cuda_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  std::printf("device: %s\n", testkit::cuda_device_name().c_str());
  std::mt19937_64 rng(7);
  {
    // Keep stream-ordered scratch (the forward's intermediates) cached between calls, as a
    // framework's caching allocator would.
    cudaMemPool_t pool;
    BENCH_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = ~uint64_t(0);
    BENCH_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  double copy_gbs = 0;  // the device-to-device copy of this run: the ceiling every row is a share of
  if (only.empty() || std::find(only.begin(), only.end(), "copy") != only.end()) {
    const size_t bytes = size_t(1) << 30;
    void *x, *y;
    BENCH_CUDA_CHECK(cudaMalloc(&x, bytes));
    BENCH_CUDA_CHECK(cudaMalloc(&y, bytes));
    BENCH_CUDA_CHECK(cudaMemset(x, 1, bytes));
    const double ms = time_ms([&] { BENCH_CUDA_CHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice)); }, 20, false);
    copy_gbs = 2.0 * bytes / ms / 1e6;
    std::printf("%-28s %9.4f ms  %8.1f GB/s (read+write)\n", "copy 1 GiB", ms, copy_gbs);
    BENCH_CUDA_CHECK(cudaFree(x));
    BENCH_CUDA_CHECK(cudaFree(y));
  }
  auto pct = [&](double gbs) { return copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0; };
  const bool decode_rows = only.empty() || std::find(only.begin(), only.end(), "decode") != only.end();
  // `decode-sweep`: the batches between too, where the decode kernels trade places.
  const bool decode_sweep = std::find(only.begin(), only.end(), "decode-sweep") != only.end();
  std::vector<int64_t> decode_batches;
  if (decode_sweep) decode_batches = {1, 2, 4, 8, 16, 32, 64, 256};
  else if (decode_rows) decode_batches = {1, 32, 256};
  for (int64_t B : decode_batches) {
    // q/k already unit-norm as in the fla anchor; several pools so repeated runs do not hit L2.
    Buffer q = dev_normal(DType::kBFloat16, {B, H, D}, rng, 0.09f);
    Buffer k = dev_normal(DType::kBFloat16, {B, H, D}, rng, 0.09f);
    Buffer v = dev_normal(DType::kBFloat16, {B, HV, D}, rng);
    Buffer g = dev_uniform(DType::kFloat32, {B, HV}, rng, -1.f, -0.01f);
    Buffer beta = dev_uniform(DType::kBFloat16, {B, HV}, rng, 0.1f, 1.f);
    Buffer o(DType::kBFloat16, {B, HV, D}, cuda(0));
    const int pools = B >= 32 ? 2 : 8;
    std::vector<Buffer> pool;
    for (int i = 0; i < pools; ++i) pool.push_back(dev_normal(DType::kFloat32, {B, HV, D, D}, rng, 0.3f));
    std::vector<int32_t> perm(B);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Buffer idx(DType::kInt32, {B}, cuda(0));
    idx.from_int(perm);
    size_t it = 0;
    auto run = [&] {
      GdnDecodeArgs a;
      a.q = q.view();
      a.k = k.view();
      a.v = v.view();
      a.g = g.view();
      a.beta = beta.view();
      a.state_pool = pool[it++ % pools].view();
      a.state_indices = idx.view();
      a.o = o.view();
      check(gdn_decode_step(a), "decode");
    };
    const double bytes = 2.0 * B * HV * D * D * 4;
    // A copy of the same bytes (read + write) timed alike: what this size allows under the method.
    {
      const size_t n = pool[0].bytes();
      const double ms = time_ms([&] {
        const Buffer& src = pool[it++ % pools];
        BENCH_CUDA_CHECK(cudaMemcpyAsync(pool[it % pools].data(), src.data(), n, cudaMemcpyDeviceToDevice));
      }, 100);
      std::printf("decode B=%-4ld %-16s %9.4f ms  %8.1f GB/s (%.1f%% of copy)\n", long(B), "same-size copy", ms,
                  bytes / ms / 1e6, pct(bytes / ms / 1e6));
    }
    // The decode step, flushed and back to back.
    const double ms = time_ms(run, 100), ms_b2b = time_ms(run, 100, false);
    std::printf("decode B=%-4ld %-16s %9.4f ms  %8.1f GB/s (%.1f%% of copy) | back to back %.4f ms %.1f GB/s (%.1f%%)\n",
                long(B), "gdn_decode_step", ms, bytes / ms / 1e6, pct(bytes / ms / 1e6), ms_b2b, bytes / ms_b2b / 1e6,
                pct(bytes / ms_b2b / 1e6));
  }
  struct Case { const char* name; int64_t T; std::vector<int32_t> lens; };
  for (const Case& c : {Case{"B1_T4k", 4096, {}}, Case{"B1_T16k", 16384, {}}, Case{"B1_T64k", 65536, {}},
                        Case{"varlen8_32k", 32768, {1000, 7000, 3000, 5000, 2768, 8000, 4000, 2000}}}) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    const int64_t T = c.T;
    Buffer q = dev_normal(DType::kBFloat16, {1, T, H, D}, rng, 0.09f);
    Buffer k = dev_normal(DType::kBFloat16, {1, T, H, D}, rng, 0.09f);
    Buffer v = dev_normal(DType::kBFloat16, {1, T, HV, D}, rng);
    Buffer g = dev_uniform(DType::kFloat32, {1, T, HV}, rng, -1.f, -0.01f);
    Buffer beta = dev_uniform(DType::kBFloat16, {1, T, HV}, rng, 0.1f, 1.f);
    Buffer o(DType::kBFloat16, {1, T, HV, D}, cuda(0));
    Buffer cu;
    int64_t N = 1, C = (T + 63) / 64;
    if (!c.lens.empty()) {
      std::vector<int32_t> cuv = {0};
      C = 0;
      for (int32_t l : c.lens) {
        cuv.push_back(cuv.back() + l);
        C += (l + 63) / 64;
      }
      N = static_cast<int64_t>(c.lens.size());
      cu = Buffer(DType::kInt32, {N + 1}, cuda(0));
      cu.from_int(cuv);
    }
    Buffer fin(DType::kFloat32, {N, HV, D, D}, cuda(0));
    GdnChunkArgs a;
    a.q = q.view();
    a.k = k.view();
    a.v = v.view();
    a.g = g.view();
    a.beta = beta.view();
    if (!cu.empty()) a.cu_seqlens = cu.view();
    a.final_state = fin.view();
    a.o = o.view();
    const double ms = time_ms([&] { check(gdn_chunk_forward(a), "forward"); }, 20);
    // The same forward with the mma.sync kernels (what non-Hopper GPUs run).
    detail::GdnKernels mma, mma_intra;
    mma.mma_sync = true;
    mma_intra.mma_sync_intra = true;
    const double ms_mma = time_ms([&] { check(forward_with(a, mma), "forward"); }, 20);
    // Only the intra stage on mma.sync (one CTA per value head): the WGMMA intra kernel's gain.
    const double ms_mma_intra = time_ms([&] { check(forward_with(a, mma_intra), "forward"); }, 20);
    // Stages alone, on bf16 intermediates as the forward keeps them.
    TensorView cuv = cu.empty() ? TensorView{} : cu.view();
    Buffer gc(DType::kFloat32, {1, T, HV}, cuda(0));
    check(gdn_chunk_cumsum({g.view(), cuv, gc.view()}), "cumsum");
    Buffer w(DType::kBFloat16, {1, T, HV, D}, cuda(0)), u(DType::kBFloat16, {1, T, HV, D}, cuda(0));
    Buffer ainv(DType::kBFloat16, {1, T, HV, 64}, cuda(0));
    check(gdn_kkt_inverse({k.view(), beta.view(), gc.view(), cuv, ainv.view()}), "kkt");
    const double ms_kkt = time_ms([&] { check(gdn_kkt_inverse({k.view(), beta.view(), gc.view(), cuv, ainv.view()}), "kkt"); }, 20);
    check(gdn_wu({k.view(), v.view(), beta.view(), gc.view(), ainv.view(), cuv, w.view(), u.view()}), "wu");
    Buffer h(DType::kBFloat16, {C, HV, D, D}, cuda(0)), vn(DType::kBFloat16, {1, T, HV, D}, cuda(0));
    GdnStateArgs sa{k.view(), w.view(), u.view(), gc.view(), cuv, {}, h.view(), vn.view(), {}};
    const double ms_h = time_ms([&] { check(gdn_state_pass(sa), "state"); }, 20);
    GdnOutputArgs oa{q.view(), k.view(), vn.view(), h.view(), gc.view(), cuv, o.view()};
    // The chunk-output stage op: its default kernel (WGMMA/TMA on sm_90) and the mma.sync one
    // (detail::GdnKernels::mma_sync), flushed and back to back.
    auto out = [&] { check(gdn_chunk_output(oa), "output"); };
    auto out_mma = [&] { check(output_with(oa, mma), "output"); };
    const double ms_o = time_ms(out, 50), ms_o_b2b = time_ms(out, 50, false);
    const double ms_o_old = time_ms(out_mma, 50), ms_o_old_b2b = time_ms(out_mma, 50, false);
    const double bytes_o = (2.0 * T * H * D + 2.0 * T * HV * D + double(C) * HV * D * D) * 2 + T * HV * 4.0;
    std::printf("forward %-12s T=%-6ld   %9.4f ms  %8.2f Mtok/s | kkt+inv %.4f ms  state %.4f ms | mma.sync fwd %.4f ms, mma intra %.4f ms\n",
                c.name, long(T), ms, T / ms / 1e3, ms_kkt, ms_h, ms_mma, ms_mma_intra);
    for (const auto& [name, a, b] : {std::tuple{"default", ms_o, ms_o_b2b}, std::tuple{"mma.sync", ms_o_old, ms_o_old_b2b}})
      std::printf("output %-12s %-9s %9.4f ms  %8.1f GB/s (%.1f%% of copy) | back to back %.4f ms %.1f GB/s (%.1f%%)\n",
                  c.name, name, a, bytes_o / a / 1e6, pct(bytes_o / a / 1e6), b, bytes_o / b / 1e6,
                  pct(bytes_o / b / 1e6));
  }
  return 0;
}
