// The Hopper (TMA) decode kernel (sm90_decode_kernel.cuh), planned here as the dispatcher plans
// it on Hopper when asked (portable_attention_plan's hopper_decode: not yet plan_attention's
// default): every head dim on both row counts, split counts, uneven and empty sequences, page
// sizes 8 / 16 / 48 / 64 / 128, ragged Q and K, every mask and score mod, sinks, bit-identical
// reruns. Cache slots no key uses hold NaN (poison_unused_kv / poison_unused_slots): the kernel
// must never read them, since a NaN in V poisons P·V even where P is 0. Where the kernel does not
// apply (page sizes not a multiple of 8, misaligned K) the plan names the portable kernel, and a
// plan naming the TMA kernel is refused with the reason.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/attention_problem.h"
#include "api/backends.h"
#include "gpu_attention_util.h"
#include "sm90_test_util.h"

namespace attnkit::test {
namespace {

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

ExecOptions auto_opts() { return ExecOptions{}; }

// The plan the dispatcher makes with the Hopper decode kernel allowed, validated with the call's
// options (with validate_device_indices the exact max_seqlen_q, which picks decode over prefill).
Status plan_hopper_decode(const AttnData& d, AttentionPlan* plan, const ExecOptions& opts) {
  detail::AttnProblem prob;
  ATTNKIT_RETURN_IF_ERROR(detail::validate_attention(d.args(), opts, &prob));
  detail::CudaDeviceInfo dev;
  ATTNKIT_RETURN_IF_ERROR(detail::cuda_device_info(prob.device.index, &dev));
  return detail::portable_attention_plan(d.args(), prob, dev, plan,
                                         detail::HopperDecode::kAlways);
}

GpuRun run_tma(const AttnCase& c, ExecOptions opts = auto_opts()) {
  auto poison = [&](AttnData& d) {
    if (c.kv == KvKind::kPaged)
      poison_unused_slots(d);
    else
      poison_unused_kv(d);
  };
  GpuRun r = run_on_gpu(c, opts, poison, [&](const AttnData& d, AttentionPlan* plan) {
    return plan_hopper_decode(d, plan, opts);
  });
  EXPECT_EQ(r.plan.backend, Backend::kCudaPortable);
  EXPECT_TRUE(has(r.plan.kernel, "+sm90tma")) << r.plan.kernel;
  return r;
}

TEST(Sm90Decode, EveryHeadDimBothRowCounts) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 9000;
  for (int d : {64, 128, 256})
    for (int sq : {1, 8})  // group 4: 4 and 32 rows
      for (int splits : {1, 3, 0}) {
        AttnCase c = AttnCase::uniform(4, sq, 1);
        c.seqlens_k = {611, 0, 64, 5};  // the second sequence has no key: O = 0, LSE = -inf
        c.kv = KvKind::kSeqused;
        c.hq = 8;
        c.hkv = 2;
        c.dqk = c.dv = d;
        c.dtype = seed % 2 ? DType::kFloat16 : DType::kBFloat16;
        c.num_splits = splits;
        c.seed = ++seed;
        SCOPED_TRACE(c.str());
        GpuRun r = run_tma(c);
        expect_gpu_matches(r);
        EXPECT_TRUE(has(r.plan.kernel, sq == 1 ? "_decode16" : "_decode32")) << r.plan.kernel;
      }
}

// Pages of 8 to 128 rows (boxes of 8 to 64 rows; 48: boxes of 16), lengths that end mid-box,
// mid-page and below one box, split counts that agree with each other, and a bit-identical rerun.
TEST(Sm90Decode, PagedEveryBoxSize) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 9100;
  for (int ps : {8, 16, 48, 64, 128})
    for (bool padding : {false, true}) {
      AttnCase c = gqa_decode_case(4, 1, 1, ++seed);
      c.seqlens_k = {1000, 37, 2113, 3};
      c.kv = KvKind::kPaged;
      c.page_size = ps;
      c.invalid_page_padding = padding;
      c.sinks = padding;
      std::vector<float> first;
      for (int splits : {1, 3, 16}) {
        c.num_splits = splits;
        SCOPED_TRACE(c.str());
        GpuRun r = run_tma(c);
        EXPECT_EQ(r.plan.num_splits, splits);
        expect_gpu_matches(r);
        const std::vector<float> o = read_back(r.dev.o);
        if (first.empty())
          first = o;
        else
          EXPECT_TRUE(close_to(o, first, gpu_o_tolerance(c.dtype), "O vs 1 split"));
        if (splits == 16) expect_rerun_bit_identical(r, auto_opts());
      }
    }
}

// Ragged Q (tokens 1, 0, 3, 2) and ragged K with very uneven lengths; the shifted last box of a
// sequence reads rows of the sequence before it, which it masks.
TEST(Sm90Decode, RaggedQueriesAndKeys) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 9200;
  ExecOptions opts = auto_opts();
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
      GpuRun r = run_tma(c, opts);
      EXPECT_TRUE(has(r.plan.kernel, "_decode32+")) << r.plan.kernel;
      expect_gpu_matches(r);
    }
}

// Masks, softcap, ALiBi and sinks on the generic variant; one-token causal on the plain one;
// contiguous (strided rows) and paged KV.
TEST(Sm90Decode, MasksAndScoreMods) {
  SKIP_UNLESS_HOPPER();
  const struct {
    int sq;
    Mask mask;
    float softcap;
    bool alibi, plain;
  } cases[] = {
      {1, Mask::none(), 0.f, false, true},
      {1, Mask::causal(), 0.f, false, true},
      {1, Mask::sliding_window(50, 0), 0.f, false, false},
      {1, Mask::chunked(256, true), 0.f, false, false},
      {1, Mask::none(), 20.f, true, false},
      {3, Mask::causal(), 0.f, false, false},
      {4, Mask::sliding_window(100, 0), 30.f, true, false},
  };
  uint64_t seed = 9300;
  for (const auto& k : cases)
    for (KvKind kv : {KvKind::kSeqused, KvKind::kPaged}) {
      AttnCase c = AttnCase::uniform(3, k.sq, 700);
      c.seqlens_k = {700, 129, 1};
      c.hq = 32;
      c.hkv = 8;
      c.dqk = c.dv = 128;
      c.kv = kv;
      c.page_size = 48;
      c.strided = kv == KvKind::kSeqused;
      c.mask = k.mask;
      c.softcap = k.softcap;
      c.alibi = k.alibi;
      c.sinks = true;
      c.seed = ++seed;
      SCOPED_TRACE(c.str());
      GpuRun r = run_tma(c);
      expect_gpu_matches(r);
      EXPECT_EQ(has(r.plan.kernel, "NoMask_NoScoreMod_decode"), k.plain) << r.plan.kernel;
    }
}

// Where the TMA kernel does not apply, the plan names the portable kernel, which still runs; a
// plan that names the TMA kernel is refused for such tensors, with the reason.
TEST(Sm90Decode, PortableWhereTmaDoesNotApply) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 9400;
  for (int ps : {1, 12, 16}) {
    AttnCase c = gqa_decode_case(2, 1, 1, ++seed);
    c.seqlens_k = {777, 1500};
    c.kv = KvKind::kPaged;
    c.page_size = ps;
    SCOPED_TRACE(c.str());
    GpuRun r = run_on_gpu(c, auto_opts(), nullptr, [](const AttnData& d, AttentionPlan* plan) {
      return plan_hopper_decode(d, plan, auto_opts());
    });
    EXPECT_EQ(has(r.plan.kernel, "+sm90tma"), ps == 16) << r.plan.kernel;
    EXPECT_TRUE(has(r.plan.kernel, "_decode16")) << r.plan.kernel;
    expect_gpu_matches(r);
    AttentionPlan tma_plan;
    ASSERT_TRUE(plan_hopper_decode(r.dev, &tma_plan, auto_opts()).ok());
    if (ps != 16) {
      tma_plan.kernel += "+sm90tma";
      const Status st = attention_forward(r.dev.args(), auto_opts(), &tma_plan);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
      EXPECT_TRUE(has(st.message(), "multiple of 8")) << st.message();
      continue;
    }
    // K moved off 16-byte alignment (K and V a page fewer, so K's view stays inside its buffer).
    AttentionArgs shifted = r.dev.args();
    shifted.k.data = static_cast<char*>(shifted.k.data) + 8;
    shifted.k.shape[0] -= 1;
    shifted.v.shape[0] -= 1;
    const Status st = attention_forward(shifted, auto_opts(), &tma_plan);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_TRUE(has(st.message(), "16-byte")) << st.message();
  }
}

// The TMA kernel and the portable one agree on the same inputs (batch 16, GQA 32/8, 8k keys).
TEST(Sm90Decode, AgreesWithPortableKernel) {
  SKIP_UNLESS_HOPPER();
  for (KvKind kv : {KvKind::kSeqused, KvKind::kPaged}) {
    AttnCase c = gqa_decode_case(16, 1, 8192, 9500 + static_cast<int>(kv));
    c.kv = kv;
    c.page_size = 64;
    SCOPED_TRACE(c.str());
    GpuRun tma = run_tma(c);
    expect_gpu_matches(tma);
    GpuRun portable = run_on_gpu(c, portable_opts());
    EXPECT_FALSE(has(portable.plan.kernel, "+sm90tma")) << portable.plan.kernel;
    EXPECT_TRUE(close_to(read_back(tma.dev.o), read_back(portable.dev.o),
                         gpu_o_tolerance(c.dtype), "O: TMA vs portable"));
  }
}

}  // namespace
}  // namespace attnkit::test
