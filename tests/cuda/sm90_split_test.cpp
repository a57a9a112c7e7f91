// Split-KV on the Hopper (sm_90a) prefill kernel: every case runs with 1, 3 and 16 splits (or 1
// and the automatic count) on the same inputs, forced with Backend::kCudaSm90, and each run must
// (a) be planned as the sm90 variant the case needs, "+split_combine" when split, with the split
// count asked for or the automatic rule's (never a silent portable fallback), (b) match the CPU
// reference (O and LSE), and (c) match the one-split run.
// Outputs are poisoned (NaN) before each run; a caller-supplied workspace is poisoned too, so a
// partial the combine reads but no split wrote fails. Splits past a query tile's KV tile count
// (16 splits over a few tiles) get no tiles and must write O = 0, LSE = -inf partials, which the
// combine ignores; rows that see no key at all (Sq > Sk causal, windows) end with O = 0 and
// LSE = -inf, sinks or not. Skipped on non-Hopper GPUs.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/attention/sm90/sm90_split_plan.h"
#include "sm90_test_util.h"

namespace attnkit::test {
namespace {

bool is_causal(const Mask& m) {
  return m.window_left < 0 && m.window_right == 0 && m.chunk_size == 0;
}

// The sm90 variant a case must run: sm90_fwd_d<D>_<dtype>_<variant>[+split_combine].
std::string expected_kernel(const AttnCase& c, int splits) {
  const char* mask = c.mask.is_none() ? "none" : is_causal(c.mask) ? "causal" : "local";
  std::string v = c.softcap > 0   ? "local_softcap"
                  : c.sinks       ? "local_sinks"
                  : c.kv == KvKind::kPaged ? std::string("paged_") + mask
                                           : std::string(mask);
  const std::string dims =
      std::to_string(c.dqk) + (c.dqk == c.dv ? "" : "_" + std::to_string(c.dv));
  return "sm90_fwd_d" + dims + "_" + (c.dtype == DType::kBFloat16 ? "bf16" : "fp16") + "_" + v +
         (splits > 1 ? "+split_combine" : "");
}

// The automatic count (num_splits = 0) the plan must make for `c` on this GPU: the rule of
// sm90_split_plan.h (checked on its own by tests/cpu/sm90_split_plan_test.cpp), on the case's
// longest sequences.
int auto_splits(const AttnCase& c) {
  int dev = 0, sms = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  const int max_q = *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end());
  const int max_k = *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end());
  const int qb = gpu::sm90_q_block(c.dqk);
  gpu::Sm90SplitInput in;
  in.work_tiles = int64_t{(max_q + qb - 1) / qb} * c.hq * c.batch();
  in.kv_tiles = gpu::sm90_kv_tiles_per_query_tile(max_k, qb, gpu::sm90_kv_block(c.dqk),
                                                   c.mask.window_left, c.mask.window_right,
                                                   c.mask.chunk_size);
  in.sm_count = sms;
  return gpu::sm90_split_count(in);
}

struct SplitOptions {
  // 0: the automatic count (auto_splits).
  std::vector<int> splits{1, 3, 16};
  bool poison_unused = false;    // NaN in unused K/V rows (seqused / ragged K)
  bool caller_workspace = false;  // pass the plan's workspace, poisoned, instead of the library's
};

// Runs `c` with each split count on one set of inputs and checks the three properties above.
void check_splits(const AttnCase& c, const SplitOptions& so = {}) {
  SCOPED_TRACE(c.str());
  AttnData host = make_attn_data(c);
  if (so.poison_unused) poison_unused_kv(host);
  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  const Status cs = attention_forward(host.args(), cpu);
  ASSERT_TRUE(cs.ok()) << "cpu reference: " << cs.message();
  const std::vector<float> ref_o = read_view(host.o.view), ref_lse = read_view(host.lse.view);
  AttnData dev = host.to(cuda());
  const testkit::Tolerance tol = gpu_o_tolerance(c.dtype);
  std::vector<float> o_one, lse_one;
  for (int asked : so.splits) {
    SCOPED_TRACE("num_splits=" + std::to_string(asked));
    const int s = asked > 0 ? asked : auto_splits(c);
    dev.poison_outputs();
    AttentionArgs a = dev.args();
    a.num_splits = asked;
    ExecOptions opts = sm90_opts();
    AttentionPlan plan;
    const Status ps = plan_attention(a, opts, &plan);
    ASSERT_TRUE(ps.ok()) << "plan: " << ps.message();
    EXPECT_EQ(plan.backend, Backend::kCudaSm90);
    EXPECT_EQ(plan.kernel, expected_kernel(c, s));
    EXPECT_EQ(plan.num_splits, s);
    EXPECT_EQ(plan.workspace_bytes > 0, s > 1);
    testkit::Buffer ws;
    if (so.caller_workspace && plan.workspace_bytes > 0) {
      ws = testkit::Buffer(DType::kFloat32,
                           {static_cast<int64_t>((plan.workspace_bytes + 3) / 4)}, cuda());
      ws.poison();
      opts.workspace = ws.data();
      opts.workspace_bytes = ws.bytes();
    }
    const Status st = attention_forward(a, opts, &plan);
    ASSERT_TRUE(st.ok()) << "gpu: " << st.message();
    testkit::cuda_synchronize();
    const std::vector<float> o = read_back(dev.o), lse = read_back(dev.lse);
    EXPECT_TRUE(close_to(o, ref_o, tol, "O")) << plan.kernel;
    if (c.lse) EXPECT_TRUE(close_to(lse, ref_lse, kGpuLse, "LSE")) << plan.kernel;
    if (o_one.empty()) {
      o_one = o;
      lse_one = lse;
    } else {
      EXPECT_TRUE(close_to(o, o_one, tol, "O against the first split count")) << plan.kernel;
      if (c.lse)
        EXPECT_TRUE(close_to(lse, lse_one, kGpuLse, "LSE against the first split count"))
            << plan.kernel;
    }
  }
}

TEST(Sm90Split, MasksByHeadDimDtype) {
  SKIP_UNLESS_HOPPER();
  // Sq < Sk: several KV tiles per query tile (700 keys: 6 tiles of 128, 11 of 64), so 3 splits
  // share them and 16 leave some splits without a tile. GQA 4/2 (sm90_base).
  uint64_t seed = 31000;
  int i = 0;
  for (int d : {64, 128, 256})
    for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(100, 0),
                          Mask::sliding_window(200, 150), Mask::chunked(256, true)}) {
      AttnCase c = sm90_base(2, 300, 700, ++seed);
      c.dqk = c.dv = d;
      c.dtype = (i++ % 2) ? DType::kFloat16 : DType::kBFloat16;
      c.mask = m;
      check_splits(c);
    }
}

TEST(Sm90Split, RowsWithNoVisibleKey) {
  SKIP_UNLESS_HOPPER();
  // Sq > Sk causal: the first rows see no key in any split. A narrow window: each query tile sees
  // one or two KV tiles, so most of 16 splits are empty for every row.
  uint64_t seed = 32000;
  for (int d : {64, 128, 256}) {
    AttnCase c = sm90_base(2, 500, 300, ++seed);
    c.dqk = c.dv = d;
    c.mask = Mask::causal();
    check_splits(c);
    AttnCase w = sm90_base(1, 1000, 1000, ++seed);
    w.dqk = w.dv = d;
    w.mask = Mask::sliding_window(32, 0);
    check_splits(w);
  }
}

TEST(Sm90Split, RaggedAndSequsedWithNanInUnusedRows) {
  SKIP_UNLESS_HOPPER();
  // Uneven lengths: an empty query sequence, one with no keys, lengths off the tile grids; K/V
  // rows that no sequence uses hold NaN.
  uint64_t seed = 33000;
  for (KvKind kv : {KvKind::kRagged, KvKind::kSeqused})
    for (int d : {64, 128, 256})
      for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(64, 0)}) {
        AttnCase c = sm90_base(5, 0, 0, ++seed);
        c.ragged_q = true;
        c.kv = kv;
        c.seqlens_q = {300, 0, 1, 129, 517};
        c.seqlens_k = {300, 17, 0, 1400, 517};
        c.dqk = c.dv = d;
        c.mask = m;
        check_splits(c, {{1, 3, 16}, /*poison_unused=*/true});
      }
}

TEST(Sm90Split, GqaLlamaHeads) {
  SKIP_UNLESS_HOPPER();
  // GQA 32/8 at head dim 128 (Llama-3-8B), batch 1: the shape split-KV is for (few query tiles).
  uint64_t seed = 34000;
  for (bool causal : {false, true}) {
    AttnCase c = sm90_base(1, 256, 2048, ++seed);
    c.hq = 32;
    c.hkv = 8;
    if (causal) c.mask = Mask::causal();
    check_splits(c, {{1, 3, 16, 7}});
  }
}

TEST(Sm90Split, SinksAndSoftcap) {
  SKIP_UNLESS_HOPPER();
  // The sink joins the denominator once, in the combine (the partials leave it out); rows with no
  // visible key stay O = 0, LSE = -inf with a sink.
  uint64_t seed = 35000;
  for (int d : {64, 128, 256})
    for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(64, 0)}) {
      AttnCase c = sm90_base(2, 500, 300, ++seed);
      c.sinks = true;
      c.dqk = c.dv = d;
      c.mask = m;
      check_splits(c);
      AttnCase s = sm90_base(2, 300, 420, ++seed);
      s.softcap = 30.f;
      s.qk_scale = 3.f;
      s.dqk = s.dv = d;
      s.mask = m;
      check_splits(s);
    }
}

TEST(Sm90Split, HeadDims192And96) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 36000;
  for (auto [dqk, dv] : {std::pair{192, 128}, {96, 96}})
    for (bool causal : {false, true}) {
      AttnCase c = sm90_base(2, 300, 900, ++seed);
      c.dqk = dqk;
      c.dv = dv;
      c.dtype = causal ? DType::kFloat16 : DType::kBFloat16;
      if (causal) c.mask = Mask::causal();
      check_splits(c);
    }
}

TEST(Sm90Split, PagedKv) {
  SKIP_UNLESS_HOPPER();
  // Chunked prefill over a paged cache (page size = the KV tile at 128, twice it at 64).
  uint64_t seed = 37000;
  for (int d : {64, 128})
    for (const Mask& m : {Mask::causal(), Mask::none()}) {
      AttnCase c = sm90_base(0, 0, 0, ++seed);
      c.ragged_q = true;
      c.kv = KvKind::kPaged;
      c.page_size = d == 64 ? 256 : 128;
      c.seqlens_q = {200, 1, 77, 0, 130};
      c.seqlens_k = {1000, 129, 77, 0, 700};
      c.hq = 8;
      c.hkv = 2;
      c.dqk = c.dv = d;
      c.mask = m;
      check_splits(c);
    }
}

TEST(Sm90Split, CallerWorkspacePoisoned) {
  SKIP_UNLESS_HOPPER();
  // Every partial the combine reads must have been written by a split: the caller's workspace
  // starts as NaN.
  uint64_t seed = 38000;
  for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(32, 0)}) {
    AttnCase c = sm90_base(3, 0, 0, ++seed);
    c.ragged_q = true;
    c.kv = KvKind::kRagged;
    c.seqlens_q = {200, 0, 450};
    c.seqlens_k = {600, 10, 450};
    c.mask = m;
    check_splits(c, {{3, 16}, false, /*caller_workspace=*/true});
  }
}

TEST(Sm90Split, AutomaticCountMatchesOneSplit) {
  SKIP_UNLESS_HOPPER();
  // Few query tiles over many keys, where the automatic count (num_splits = 0) splits: one query
  // tile per head, GQA 32/8 (d128) and 4/2 (d256, 64-key tiles), batch 1, causal and not, and a
  // window that bounds the keys to a few tiles (unsplit). Each must plan the count of the rule,
  // run it, and match the reference and the one-split run.
  uint64_t seed = 38500;
  int split_runs = 0;
  for (int d : {128, 256})
    for (const Mask& m : {Mask::none(), Mask::causal(), Mask::sliding_window(300, 0)}) {
      AttnCase c = sm90_base(1, 120, 3000, ++seed);
      if (d == 128) {
        c.hq = 32;
        c.hkv = 8;
      }
      c.dqk = c.dv = d;
      c.mask = m;
      split_runs += auto_splits(c) > 1;
      check_splits(c, {{1, 0}});
    }
  // Not a vacuous check: 32 or 4 work tiles on 78 SMs or more split (the unwindowed cases; the
  // window's few KV tiles, 4 at d128 and 7 at d256, do not).
  EXPECT_EQ(split_runs, 4);
}

TEST(Sm90Split, PlanCapsAndAutoStaysUnsplitOnFewKeys) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = sm90_base(1, 256, 384, 39000);
  AttnData dev = make_attn_data(c).to(cuda());
  AttentionArgs a = dev.args();
  AttentionPlan plan;
  // More than the combine's cap: capped, still the sm90 kernel.
  a.num_splits = 1000;
  ASSERT_TRUE(plan_attention(a, sm90_opts(), &plan).ok());
  EXPECT_EQ(plan.backend, Backend::kCudaSm90);
  EXPECT_EQ(plan.num_splits, 128);
  EXPECT_EQ(plan.kernel, expected_kernel(c, 128));
  // The library's choice (0): three KV tiles, too few to split (sm90_split_plan.h).
  a.num_splits = 0;
  ASSERT_TRUE(plan_attention(a, ExecOptions{}, &plan).ok());
  EXPECT_EQ(plan.backend, Backend::kCudaSm90);
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_EQ(plan.kernel, expected_kernel(c, 1));
  EXPECT_EQ(plan.workspace_bytes, 0u);
  // Auto with splits asked for also picks sm90 (it used to fall back to the portable kernels).
  a.num_splits = 4;
  ASSERT_TRUE(plan_attention(a, ExecOptions{}, &plan).ok());
  EXPECT_EQ(plan.backend, Backend::kCudaSm90) << plan.kernel;
  EXPECT_EQ(plan.kernel, expected_kernel(c, 4));
  // A plan whose split count does not match its kernel name is refused.
  AttentionPlan bad = plan;
  bad.num_splits = 1;
  const Status st = attention_forward(a, sm90_opts(), &bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("num_splits"), std::string::npos) << st.message();
}

TEST(Sm90Split, RerunsAreBitIdentical) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = sm90_base(2, 400, 1500, 39500);
  c.mask = Mask::causal();
  c.num_splits = 5;
  AttnData dev = make_attn_data(c).to(cuda());
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(dev.args(), sm90_opts(), &plan).ok());
  EXPECT_EQ(plan.kernel, expected_kernel(c, 5));
  dev.poison_outputs();
  ASSERT_TRUE(attention_forward(dev.args(), sm90_opts(), &plan).ok());
  testkit::cuda_synchronize();
  const auto o1 = bytes_of(dev.o), l1 = bytes_of(dev.lse);
  dev.poison_outputs();
  ASSERT_TRUE(attention_forward(dev.args(), sm90_opts(), &plan).ok());
  testkit::cuda_synchronize();
  EXPECT_EQ(bytes_of(dev.o), o1);
  EXPECT_EQ(bytes_of(dev.lse), l1);
}

}  // namespace
}  // namespace attnkit::test
