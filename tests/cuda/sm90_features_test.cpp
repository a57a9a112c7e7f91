// Hopper (sm_90a) prefill features against the CPU reference, forced with Backend::kCudaSm90 and
// checked to run the sm90 variant they should (never a silent portable fallback): ragged Q / K
// (cu_seqlens) and seqused_k with uneven lengths (zero-length sequences, lengths off the tile
// grid), unused K/V rows full of NaN that must never be read, sliding-window and chunked masks
// with Sq != Sk, softcap, learned sinks; bf16 / fp16, head dims 64 / 128 / 256 (and 192 / 128, 96
// with no mask and causal). Outputs are poisoned (NaN) before each run, so an unwritten element
// fails. Skipped on non-Hopper GPUs.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>

#include "sm90_test_util.h"

namespace attnkit::test {
namespace {

// The sm90 variant a case must run: sm90_fwd_d<D>_<dtype>_<variant>.
std::string expected_kernel(const AttnCase& c) {
  std::string v = c.softcap > 0 ? "local_softcap"
                  : c.sinks     ? "local_sinks"
                  : c.mask.is_none() ? "none"
                  : (c.mask.window_left < 0 && c.mask.window_right == 0 && c.mask.chunk_size == 0)
                      ? "causal"
                      : "local";
  const std::string dims =
      std::to_string(c.dqk) + (c.dqk == c.dv ? "" : "_" + std::to_string(c.dv));
  return "sm90_fwd_d" + dims + "_" +
         (c.dtype == DType::kBFloat16 ? "bf16" : "fp16") + "_" + v;
}

// Runs the CPU reference and the sm90 kernels on the same inputs and compares; the plan must
// name the sm90 variant the case needs.
GpuRun run_sm90(const AttnCase& c, bool poison_unused = false) {
  GpuRun r = run_on_gpu(c, sm90_opts(), poison_unused ? poison_unused_kv : nullptr);
  EXPECT_EQ(r.plan.backend, Backend::kCudaSm90);
  EXPECT_EQ(r.plan.kernel, expected_kernel(c));
  return r;
}

void check_sm90(const AttnCase& c, bool poison_unused = false) {
  SCOPED_TRACE(c.str());
  GpuRun r = run_sm90(c, poison_unused);
  expect_gpu_matches(r);
}

TEST(Sm90Varlen, RaggedQAndKvByHeadDimDtypeMask) {
  SKIP_UNLESS_HOPPER();
  // Uneven lengths: an empty query sequence, a one-row one, a sequence with no keys, lengths on
  // and off the 64/128/192-row and 64/128-key tile grids.
  uint64_t seed = 11000;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (bool causal : {false, true}) {
        AttnCase c = sm90_base(5, 0, 0, ++seed);
        c.ragged_q = true;
        c.kv = KvKind::kRagged;
        c.seqlens_q = {300, 0, 1, 129, 517};
        c.seqlens_k = {300, 17, 0, 400, 517};
        c.dtype = dt;
        c.dqk = c.dv = d;
        if (causal) c.mask = Mask::causal();
        check_sm90(c);
      }
}

TEST(Sm90Varlen, LayoutMatrix) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 12000;
  for (KvKind kv : {KvKind::kContiguous, KvKind::kSeqused, KvKind::kRagged})
    for (bool ragged_q : {false, true})
      for (bool causal : {false, true}) {
        AttnCase c = sm90_base(3, 200, 0, ++seed);
        c.kv = kv;
        c.ragged_q = ragged_q;
        c.seqlens_k = kv == KvKind::kContiguous ? std::vector<int>{250, 250, 250}
                                                : std::vector<int>{129, 0, 301};
        if (ragged_q) c.seqlens_q = {65, 200, 333};
        if (causal) c.mask = Mask::causal();
        c.dqk = c.dv = (seed % 3 == 0) ? 64 : (seed % 3 == 1 ? 128 : 256);
        check_sm90(c);
      }
}

TEST(Sm90Varlen, UnusedKvRowsAreNeverRead) {
  SKIP_UNLESS_HOPPER();
  // NaN in every cache slot past seqused_k and every packed row past cu_seqlens_k[B]: a last KV
  // tile that read them into P·V would turn whole rows into NaN.
  uint64_t seed = 13000;
  for (KvKind kv : {KvKind::kSeqused, KvKind::kRagged})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        AttnCase c = sm90_base(3, 150, 0, ++seed);
        c.kv = kv;
        c.seqlens_k = {5, 129, 70};
        c.dqk = c.dv = d;
        if (causal) c.mask = Mask::causal();
        check_sm90(c, /*poison_unused=*/true);
      }
}

TEST(Sm90Varlen, ManyUnevenSequencesOnThePersistentGrid) {
  SKIP_UNLESS_HOPPER();
  // More work tiles than SMs, over a virtual grid sized by the longest sequence (the indices stay
  // on the device, so the bound is the total row count) where most tiles are past their
  // sequence's end and skipped.
  uint64_t seed = 14000;
  for (int d : {64, 128, 256})
    for (int m = 0; m < 3; ++m) {
      std::mt19937 rng(static_cast<unsigned>(++seed));
      std::uniform_int_distribution<int> len(0, 700);
      AttnCase c = sm90_base(0, 0, 0, seed);
      for (int b = 0; b < 20; ++b) {
        c.seqlens_q.push_back(b == 7 ? 0 : len(rng));
        c.seqlens_k.push_back(b == 3 ? 0 : len(rng));
      }
      c.seqlens_q[0] = 700;  // at least one prefill-sized sequence
      c.ragged_q = true;
      c.kv = KvKind::kRagged;
      c.hq = 8;
      c.hkv = 2;
      c.dqk = c.dv = d;
      if (m == 1) c.mask = Mask::causal();
      if (m == 2) c.mask = Mask::sliding_window(100, 0);
      check_sm90(c);
    }
}

TEST(Sm90Masks, WindowAndChunkedWithSqNotSk) {
  SKIP_UNLESS_HOPPER();
  // Small windows inside one KV tile, windows spanning several tiles (fully visible tiles in the
  // middle, masked ones at both edges), chunks smaller and larger than a tile, chunked causal,
  // windows intersected with chunks; Sq < Sk, Sq > Sk (rows with no visible key).
  const Mask masks[] = {Mask::sliding_window(32, 0),   Mask::sliding_window(16, 8),
                        Mask::sliding_window(-1, 5),   Mask::sliding_window(0, 0),
                        Mask::sliding_window(300, 0),  Mask::sliding_window(200, 150),
                        Mask::sliding_window(450, -1), Mask::chunked(64),
                        Mask::chunked(48, true),       Mask::chunked(384, true),
                        Mask{20, 3, 32},               Mask{500, 0, 256}};
  const std::pair<int, int> lens[] = {{150, 150}, {97, 600}, {700, 300}, {1000, 1000}};
  uint64_t seed = 15000;
  int i = 0;
  for (const Mask& m : masks)
    for (auto [sq, sk] : lens) {
      AttnCase c = sm90_base(2, sq, sk, ++seed);
      c.mask = m;
      c.dqk = c.dv = (i % 3 == 0) ? 64 : (i % 3 == 1 ? 128 : 256);
      c.dtype = (i / 3) % 2 ? DType::kFloat16 : DType::kBFloat16;
      ++i;
      check_sm90(c);
    }
}

TEST(Sm90Masks, WindowOnRaggedAndSeqused) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 16000;
  for (KvKind kv : {KvKind::kSeqused, KvKind::kRagged})
    for (const Mask& m : {Mask::sliding_window(64, 0), Mask::chunked(100, true), Mask{130, 40, 0}}) {
      AttnCase c = sm90_base(4, 0, 0, ++seed);
      c.ragged_q = true;
      c.kv = kv;
      c.seqlens_q = {400, 0, 33, 260};
      c.seqlens_k = {400, 50, 0, 700};
      c.mask = m;
      check_sm90(c, /*poison_unused=*/true);
    }
}

TEST(Sm90ScoreMods, Softcap) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 17000;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(100, 0)}) {
        AttnCase c = sm90_base(2, 300, 420, ++seed);
        c.softcap = 30.f;
        c.qk_scale = 3.f;  // logits large enough that the cap bends them
        c.dtype = dt;
        c.dqk = c.dv = d;
        c.mask = m;
        check_sm90(c);
      }
}

TEST(Sm90ScoreMods, LearnedSinks) {
  SKIP_UNLESS_HOPPER();
  // Includes rows with no visible key (Sq > Sk causal): O = 0 and LSE = -inf, sink or not.
  uint64_t seed = 18000;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(64, 0)}) {
        AttnCase c = sm90_base(2, 500, 300, ++seed);
        c.sinks = true;
        c.dtype = dt;
        c.dqk = c.dv = d;
        c.mask = m;
        check_sm90(c);
      }
  AttnCase c = sm90_base(3, 0, 0, ++seed);
  c.sinks = true;
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {90, 0, 300};
  c.seqlens_k = {0, 10, 333};
  c.mask = Mask::causal();
  check_sm90(c);
}

TEST(Sm90HeadDims, Dqk192Dv128And96) {
  SKIP_UNLESS_HOPPER();
  // Built for no mask and causal: batched with Sq != Sk (rows with no visible key), and ragged Q
  // over seqused_k / ragged K with NaN in every unused K/V row.
  uint64_t seed = 19200;
  for (auto [dqk, dv] : {std::pair{192, 128}, {96, 96}})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (bool causal : {false, true}) {
        for (auto [sq, sk] : {std::pair{300, 517}, {600, 250}}) {
          AttnCase c = sm90_base(2, sq, sk, ++seed);
          c.dqk = dqk;
          c.dv = dv;
          c.dtype = dt;
          if (causal) c.mask = Mask::causal();
          check_sm90(c);
        }
        for (KvKind kv : {KvKind::kSeqused, KvKind::kRagged}) {
          AttnCase c = sm90_base(4, 0, 0, ++seed);
          c.ragged_q = true;
          c.kv = kv;
          c.seqlens_q = {400, 0, 33, 260};
          c.seqlens_k = {400, 50, 0, 701};
          c.dqk = dqk;
          c.dv = dv;
          c.dtype = dt;
          if (causal) c.mask = Mask::causal();
          check_sm90(c, /*poison_unused=*/true);
        }
      }
  // Other masks at these head dims are not built: forced sm90 says so.
  AttnCase c = sm90_base(1, 200, 200, ++seed);
  c.dqk = 192;
  c.dv = 128;
  c.mask = Mask::sliding_window(50, 0);
  AttnData dev = make_attn_data(c).to(cuda());
  AttentionPlan plan;
  const Status st = plan_attention(dev.args(), sm90_opts(), &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no mask and causal only"), std::string::npos) << st.message();
}

TEST(Sm90Varlen, RerunsAreBitIdentical) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = sm90_base(4, 0, 0, 19000);
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {400, 0, 33, 260};
  c.seqlens_k = {400, 50, 0, 700};
  c.mask = Mask::sliding_window(64, 0);
  GpuRun r = run_sm90(c);
  expect_gpu_matches(r);
  expect_rerun_bit_identical(r, sm90_opts());
}

TEST(Sm90Varlen, AutoPicksSm90ForTheFeatures) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = sm90_base(3, 0, 0, 19500);
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {100, 300, 17};
  c.seqlens_k = {100, 300, 40};
  c.mask = Mask::sliding_window(50, 0);
  GpuRun r = run_on_gpu(c, ExecOptions{});
  EXPECT_EQ(r.plan.backend, Backend::kCudaSm90) << r.plan.kernel;
  EXPECT_EQ(r.plan.kernel, expected_kernel(c));
  expect_gpu_matches(r);
}

}  // namespace
}  // namespace attnkit::test
