// The portable decode kernel (decode_kernel.cuh) and its combine: every head dim on both row
// counts (16 and 32 rows per KV head), the plain variant the dispatcher picks for unmasked (or
// one-token causal) decode against the generic one, ragged Q and K, more splits than a warp has
// lanes, the requested split count clamped to what the combine takes, the 8-warp tile, and the
// L2 policy of the K/V reads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_attention_util.h"

namespace attnkit::test {
namespace {

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

TEST(PortableDecodeKernel, EveryHeadDimBothRowCounts) {
  const struct {
    int dqk, dv;
  } dims[] = {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};
  uint64_t seed = 2000;
  for (const auto& d : dims)
    for (int sq : {1, 8})  // group 4: 4 and 32 rows
      for (int splits : {1, 3, 0}) {
        AttnCase c = AttnCase::uniform(2, sq, 1);
        c.seqlens_k = {611, 0};  // the second sequence has no key: O = 0, LSE = -inf
        c.kv = KvKind::kSeqused;
        c.hq = 8;
        c.hkv = 2;
        c.dqk = d.dqk;
        c.dv = d.dv;
        c.dtype = seed % 2 ? DType::kFloat16 : DType::kBFloat16;
        c.num_splits = splits;
        c.seed = ++seed;
        SCOPED_TRACE(c.str());
        GpuRun r = run_on_gpu(c);
        expect_gpu_matches(r);
        EXPECT_TRUE(has(r.plan.kernel, sq == 1 ? "_decode16" : "_decode32")) << r.plan.kernel;
      }
}

// No mask, and causal with one query token, take the plain variant; other masks and the score
// mods take the generic one. Both agree with the reference.
TEST(PortableDecodeKernel, PlainAndGenericVariants) {
  const struct {
    int sq;
    Mask mask;
    float softcap;
    bool plain;
  } cases[] = {
      {1, Mask::none(), 0.f, true},
      {1, Mask::causal(), 0.f, true},
      {1, Mask::sliding_window(50, 0), 0.f, false},
      {1, Mask::chunked(256, true), 0.f, false},
      {1, Mask::none(), 20.f, false},
      {3, Mask::causal(), 0.f, false},
      {3, Mask::none(), 0.f, true},
  };
  uint64_t seed = 2100;
  for (const auto& k : cases)
    for (KvKind kv : {KvKind::kContiguous, KvKind::kPaged}) {
      AttnCase c = AttnCase::uniform(3, k.sq, 700);
      c.hq = 32;
      c.hkv = 8;
      c.dqk = c.dv = 128;
      c.kv = kv;
      c.page_size = 48;
      c.mask = k.mask;
      c.softcap = k.softcap;
      c.sinks = true;
      c.seed = ++seed;
      SCOPED_TRACE(c.str());
      GpuRun r = run_on_gpu(c);
      expect_gpu_matches(r);
      EXPECT_EQ(has(r.plan.kernel, "NoMask_NoScoreMod_decode"), k.plain) << r.plan.kernel;
      EXPECT_TRUE(has(r.plan.kernel, "_decode")) << r.plan.kernel;
    }
}

// Ragged Q (tokens 1, 0, 3, 2) and ragged K with very uneven lengths, with and without splits.
// The indices are validated on the host, which gives the exact max_seqlen_q (3 tokens x group 8
// = 24 rows), so the decode kernel serves it (device-only indices bound it by all of Q's rows).
TEST(PortableDecodeKernel, RaggedQueriesAndKeys) {
  uint64_t seed = 2200;
  ExecOptions opts = portable_opts();
  opts.validate_device_indices = true;
  for (int splits : {1, 5, 0})
    for (bool causal : {false, true}) {
      AttnCase c;
      c.seqlens_q = {1, 0, 3, 2};
      c.seqlens_k = {900, 13, 0, 2500};
      c.ragged_q = true;
      c.kv = KvKind::kRagged;
      c.hq = 16;
      c.hkv = 2;
      c.dqk = c.dv = 128;
      if (causal) c.mask = Mask::causal();
      c.num_splits = splits;
      c.seed = ++seed;
      SCOPED_TRACE(c.str());
      GpuRun r = run_on_gpu(c, opts);
      expect_gpu_matches(r);
      EXPECT_TRUE(has(r.plan.kernel, "_decode32")) << r.plan.kernel;
    }
}

// More splits than a warp has lanes (the combine's loops over splits), large logits, and a
// requested count above what the combine takes (clamped to it, still correct).
TEST(PortableDecodeKernel, ManySplits) {
  uint64_t seed = 2300;
  for (int splits : {33, 128, 500}) {
    AttnCase c = AttnCase::uniform(1, 1, 6000);
    c.hq = 32;
    c.hkv = 8;
    c.dqk = c.dv = 128;
    c.kv = KvKind::kPaged;
    c.page_size = 16;
    c.sinks = true;
    c.qk_scale = 4.f;
    c.num_splits = splits;
    c.seed = ++seed;
    SCOPED_TRACE(c.str());
    GpuRun r = run_on_gpu(c);
    expect_gpu_matches(r);
    EXPECT_EQ(r.plan.num_splits, splits > 128 ? 128 : splits);
  }
}

// The plain 16-row head-dim-128 variant runs 8 warps on 64-key stages, except for split calls
// over contiguous or ragged KV, which run 4 warps on 32-key stages (decode_key_groups): key
// counts that end mid-stage and mid-page and one shorter than a stage, contiguous (seqused) and
// paged KV with pages of 1, 16 and 64 keys, 4 and 16 rows (sinks on the latter); split counts 1,
// 3 and 16 agree with each other (on contiguous KV: the 8-warp tile with the 4-warp one) and the
// reference, and a rerun of the split run is bit-identical.
TEST(PortableDecodeKernel, EightWarpTile) {
  uint64_t seed = 2400;
  for (int ps : {0, 1, 16, 64})
    for (int sq : {1, 4}) {  // group 4: 4 and 16 rows, both on the 16-row tile
      AttnCase c = gqa_decode_case(3, sq, 1, ++seed);
      c.seqlens_k = {1000, 37, 2113};
      c.kv = ps == 0 ? KvKind::kSeqused : KvKind::kPaged;
      c.page_size = ps;
      c.sinks = sq == 4;
      std::vector<float> first;
      for (int splits : {1, 3, 16}) {
        c.num_splits = splits;
        SCOPED_TRACE(c.str());
        GpuRun r = run_on_gpu(c);
        EXPECT_EQ(r.plan.num_splits, splits);
        EXPECT_TRUE(has(r.plan.kernel, "_decode16")) << r.plan.kernel;
        EXPECT_TRUE(has(r.plan.kernel, "NoMask_NoScoreMod")) << r.plan.kernel;
        expect_gpu_matches(r);
        const std::vector<float> o = read_back(r.dev.o);
        if (first.empty())
          first = o;
        else
          EXPECT_TRUE(close_to(o, first, gpu_o_tolerance(c.dtype), "O vs 1 split"));
        if (splits != 16) continue;
        expect_rerun_bit_identical(r, portable_opts());
      }
    }
}

// Paged KV with V's rows strided apart from K's: the kernel forms V's offsets on their own instead
// of reusing K's (KvOperand::same_strides), on both tiles (1 and 3 splits).
TEST(PortableDecodeKernel, PagedKvStridedApart) {
  uint64_t seed = 2500;
  for (int ps : {1, 16})
    for (int splits : {1, 3}) {
      AttnCase c = gqa_decode_case(2, 1, 1, ++seed);
      c.seqlens_k = {777, 1500};
      c.kv = KvKind::kPaged;
      c.page_size = ps;
      c.v_strided_apart = true;
      c.num_splits = splits;
      SCOPED_TRACE(c.str());
      GpuRun r = run_on_gpu(c);
      EXPECT_TRUE(has(r.plan.kernel, "_decode16")) << r.plan.kernel;
      expect_gpu_matches(r);
      if (ps != 16 || splits != 1) continue;
      // A page stride of 2^31 elements does not fit the kernel's 32-bit page arithmetic: the plan
      // says so (views of the same small buffer; planning reads no data), and the plan above is
      // refused for those arguments.
      AttentionArgs big = r.dev.args();
      TensorView& k = big.k;
      k.stride[0] = int64_t{1} << 31;
      AttentionPlan plan;
      const Status st = plan_attention(big, portable_opts(), &plan);
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
      EXPECT_TRUE(has(st.message(), "2^31")) << st.message();
      EXPECT_EQ(attention_forward(big, portable_opts(), &r.plan).code(),
                StatusCode::kInvalidArgument);
    }
}

// The planner reads K/V evict-first in L2 (decode_l2_stream) where a call may read at most 8 x L2
// of it: every decode case of this suite does, so the kernels above ran with that policy
// (checked here on the plain and the generic variant, contiguous and paged), and the plan names
// it. A call that may read more keeps the default policy: planned here on views of a small buffer
// with 64k keys per sequence (537 MB of K/V; planning reads no data), which also gives the
// +l2stream plan's kernel the default policy's name.
TEST(PortableDecodeKernel, L2PolicyFollowsKvBytes) {
  uint64_t seed = 2500;
  for (KvKind kv : {KvKind::kContiguous, KvKind::kPaged})
    for (bool window : {false, true}) {
      AttnCase c = gqa_decode_case(2, 1, 3000, ++seed);
      c.kv = kv;
      if (window) c.mask = Mask::sliding_window(700, 0);
      SCOPED_TRACE(c.str());
      GpuRun r = run_on_gpu(c);
      expect_gpu_matches(r);
      EXPECT_TRUE(has(r.plan.kernel, "+l2stream")) << r.plan.kernel;
      EXPECT_EQ(has(r.plan.kernel, "NoMask_NoScoreMod_decode16"), !window) << r.plan.kernel;
      if (kv != KvKind::kContiguous || window) continue;
      AttentionArgs big = r.dev.args();
      big.k = make_view(big.k.data, DType::kBFloat16, {2, 65536, 8, 128}, big.k.device);
      big.v = make_view(big.v.data, DType::kBFloat16, {2, 65536, 8, 128}, big.v.device);
      AttentionPlan plan;
      const Status st = plan_attention(big, portable_opts(), &plan);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_TRUE(has(plan.kernel, "NoMask_NoScoreMod_decode16")) << plan.kernel;
      EXPECT_FALSE(has(plan.kernel, "+l2stream")) << plan.kernel;
      EXPECT_EQ(plan.kernel.substr(0, plan.kernel.find('+')),
                r.plan.kernel.substr(0, r.plan.kernel.find('+')));
    }
}

}  // namespace
}  // namespace attnkit::test
