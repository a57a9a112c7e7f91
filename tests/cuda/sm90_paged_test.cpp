// Hopper (sm_90a) prefill over a paged KV cache against the CPU reference, forced with
// Backend::kCudaSm90 and checked to run the sm90 paged variant (never a silent portable fallback):
// the chunked-prefill-with-prefix-cache shape of inference engines (causal, Sq < Sk, ragged
// batches, GQA), page sizes 128 / 256 (64 at head dim 256), fp16 / bf16, head dims 64 / 128 / 256.
// Every cache slot that holds no key of a sequence (the tail of its last page, unused and spare
// pages) is NaN, so a tile that read one into P·V fails; that includes the last KV tile, which
// ends at the sequence's last key and may start in the page before (sm90_kv.h). Page sizes that
// are not a multiple of the KV tile go to the portable kernels, with the reason. Outputs are
// poisoned (NaN) before each run. Skipped on non-Hopper GPUs.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "sm90_test_util.h"

namespace attnkit::test {
namespace {

std::string paged_kernel(const AttnCase& c) {
  const bool causal = c.mask.window_left < 0 && c.mask.window_right == 0 && c.mask.chunk_size == 0;
  const char* v = c.mask.is_none() ? "paged_none" : causal ? "paged_causal" : "paged_local";
  return "sm90_fwd_d" + std::to_string(c.dqk) + "_" +
         (c.dtype == DType::kBFloat16 ? "bf16" : "fp16") + "_" + v;
}

GpuRun run_paged(const AttnCase& c) {
  GpuRun r = run_on_gpu(c, sm90_opts(), poison_unused_slots);
  EXPECT_EQ(r.plan.backend, Backend::kCudaSm90);
  EXPECT_EQ(r.plan.kernel, paged_kernel(c));
  return r;
}

void check_paged(const AttnCase& c) {
  SCOPED_TRACE(c.str());
  GpuRun r = run_paged(c);
  expect_gpu_matches(r);
}

// Chunked prefill with a prefix cache: each sequence's new queries (ragged) sit at the end of its
// keys. Key counts: below one tile, one tile exactly, a page exactly, a last page holding fewer
// keys than a tile (the last tile then starts in the page before), one key past a page, zero keys.
AttnCase chunked_prefill(int d, DType dt, int page_size, uint64_t seed) {
  AttnCase c = sm90_base(0, 0, 0, seed);
  c.ragged_q = true;
  c.kv = KvKind::kPaged;
  c.page_size = page_size;
  c.seqlens_q = {200, 1, 77, 0, 130, 5};
  c.seqlens_k = {1000, 129, 77, 0, 130 + page_size, 2 * page_size + 1};
  c.hq = 8;
  c.hkv = 2;
  c.dqk = c.dv = d;
  c.dtype = dt;
  return c;
}

TEST(Sm90Paged, ChunkedPrefillCausalByHeadDimDtypePageSize) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 21000;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (int ps : {128, 256}) {
        AttnCase c = chunked_prefill(d, dt, ps, ++seed);
        c.mask = Mask::causal();
        check_paged(c);
      }
}

TEST(Sm90Paged, NoMaskAndWindows) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 22000;
  const Mask masks[] = {Mask::none(), Mask::sliding_window(100, 0), Mask::chunked(192, true),
                        Mask{300, 40, 0}};
  int i = 0;
  for (const Mask& m : masks)
    for (int d : {64, 128, 256}) {
      AttnCase c = chunked_prefill(d, i % 2 ? DType::kFloat16 : DType::kBFloat16, i % 3 ? 128 : 256,
                                   ++seed);
      c.mask = m;
      ++i;
      check_paged(c);
    }
}

TEST(Sm90Paged, BatchedQueriesAndPage64AtHeadDim256) {
  SKIP_UNLESS_HOPPER();
  // Batched Q (Sq < Sk and Sq > Sk, rows with no visible key), and page size 64, which is a
  // multiple of the 64-key tile of head dim 256. Batched Q runs the variant's own scheduler (each
  // head dim and mask has its own), not the varlen one.
  uint64_t seed = 23000;
  for (auto [sq, sk] : {std::pair{300, 700}, {500, 200}, {700, 900}})
    for (bool causal : {false, true})
      for (auto [d, ps] : {std::pair{64, 128}, {128, 128}, {256, 64}}) {
        AttnCase c = sm90_base(3, sq, 0, ++seed);
        c.kv = KvKind::kPaged;
        c.page_size = ps;
        c.seqlens_k = {sk, sk - 63, 1};
        c.dqk = c.dv = d;
        if (causal) c.mask = Mask::causal();
        check_paged(c);
      }
}

TEST(Sm90Paged, RerunsAreBitIdentical) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = chunked_prefill(128, DType::kBFloat16, 128, 24000);
  c.mask = Mask::causal();
  GpuRun r = run_paged(c);
  expect_gpu_matches(r);
  expect_rerun_bit_identical(r, sm90_opts());
}

TEST(Sm90Paged, OtherPageSizesGoToPortableWithTheReason) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 25000;
  for (auto [d, ps] : {std::pair{128, 64}, {64, 16}, {256, 48}}) {
    AttnCase c = chunked_prefill(d, DType::kBFloat16, ps, ++seed);
    c.mask = Mask::causal();
    SCOPED_TRACE(c.str());
    AttnData dev = make_attn_data(c).to(cuda());
    AttentionPlan plan;
    const Status forced = plan_attention(dev.args(), sm90_opts(), &plan);
    EXPECT_FALSE(forced.ok());
    EXPECT_NE(forced.message().find("page size that is a multiple of the KV tile"), std::string::npos)
        << forced.message();
    // Automatic dispatch serves it with the portable kernels.
    GpuRun r = run_on_gpu(c, ExecOptions{});
    EXPECT_EQ(r.plan.backend, Backend::kCudaPortable) << r.plan.kernel;
    expect_gpu_matches(r);
  }
  // Paged with softcap or sinks: not built on sm90.
  AttnCase c = chunked_prefill(128, DType::kBFloat16, 128, ++seed);
  c.softcap = 20.f;
  AttnData dev = make_attn_data(c).to(cuda());
  AttentionPlan plan;
  const Status forced = plan_attention(dev.args(), sm90_opts(), &plan);
  EXPECT_FALSE(forced.ok());
  EXPECT_NE(forced.message().find("paged K/V with softcap or sinks"), std::string::npos)
      << forced.message();
}

TEST(Sm90Paged, AutoPicksSm90) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = chunked_prefill(128, DType::kFloat16, 256, 26000);
  c.mask = Mask::causal();
  GpuRun r = run_on_gpu(c, ExecOptions{});
  EXPECT_EQ(r.plan.backend, Backend::kCudaSm90) << r.plan.kernel;
  EXPECT_EQ(r.plan.kernel, paged_kernel(c));
  expect_gpu_matches(r);
}

}  // namespace
}  // namespace attnkit::test
