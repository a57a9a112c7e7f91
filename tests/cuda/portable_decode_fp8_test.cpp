// The portable decode kernel over an FP8 (e4m3) KV cache, against the CPU reference of the same
// cache (which dequantises, then runs the fp32 reference): every scale kind over contiguous,
// ragged and paged K / V (page sizes 1 / 16 / 48 / 64), GQA groups 1 to 16, head dims 64 / 128 /
// 256, fp16 and bf16 queries, forced split counts over uneven lengths, masks, softcap, ALiBi,
// sinks and LSE, speculative (multi-token) queries, bf16 queries outside fp16's range, padded
// rows, bit-identical reruns; shapes the decode kernel does not hold are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/fp8_kv.h"
#include "gpu_attention_util.h"

namespace attnkit::test {
namespace {

constexpr Fp8Scale kKinds[] = {Fp8Scale::kTensor, Fp8Scale::kHead, Fp8Scale::kToken};

GpuRun run_fp8(const AttnCase& c, Fp8Scale kind) {
  return run_on_gpu(c, portable_opts(), [&](AttnData& h) { make_fp8_kv(h, kind, c.seed + 7); });
}

void check_fp8(const AttnCase& c, Fp8Scale kind) {
  SCOPED_TRACE(c.str() + " " + to_string(kind));
  GpuRun r = run_fp8(c, kind);
  EXPECT_NE(r.plan.kernel.find("_e4m3kv"), std::string::npos) << r.plan.kernel;
  EXPECT_EQ(r.plan.kernel.find("+l2stream"), std::string::npos) << r.plan.kernel;
  expect_gpu_matches(r);
}

TEST(PortableDecodeFp8, EachScaleKindAndLayout) {
  uint64_t seed = 4000;
  for (Fp8Scale kind : kKinds)
    for (KvKind kv : {KvKind::kContiguous, KvKind::kRagged, KvKind::kPaged}) {
      AttnCase c = gqa_decode_case(3, 1, 1, ++seed);
      c.kv = kv;
      c.seqlens_k = kv == KvKind::kContiguous ? std::vector<int>{700, 700, 700}
                                              : std::vector<int>{1013, 1, 300};
      c.ragged_q = kv == KvKind::kRagged;
      if (kv == KvKind::kContiguous && kind == Fp8Scale::kHead) c.kv = KvKind::kSeqused;
      check_fp8(c, kind);
    }
}

TEST(PortableDecodeFp8, HeadDimsDtypesAndGroups) {
  uint64_t seed = 4100;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (int group : {1, 4, 8, 16}) {
        AttnCase c = gqa_case(2, 1, 1, ++seed, 2 * group, 2);
        c.dqk = c.dv = d;
        c.dtype = dt;
        c.kv = KvKind::kPaged;
        c.seqlens_k = {517, 64};
        check_fp8(c, group == 8 ? Fp8Scale::kHead : Fp8Scale::kToken);
      }
}

TEST(PortableDecodeFp8, PageSizesSplitsAndUnevenLengths) {
  uint64_t seed = 4200;
  for (int ps : {1, 16, 48, 64})
    for (int splits : {1, 3, 7}) {
      AttnCase c = gqa_decode_case(4, 1, 1, ++seed);
      c.kv = KvKind::kPaged;
      c.page_size = ps;
      c.seqlens_k = {2049, 1, 96, 700};
      c.num_splits = splits;
      c.invalid_page_padding = true;
      for (Fp8Scale kind : {Fp8Scale::kHead, Fp8Scale::kToken}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        GpuRun r = run_fp8(c, kind);
        EXPECT_EQ(r.plan.num_splits, splits);
        expect_gpu_matches(r);
      }
    }
}

TEST(PortableDecodeFp8, MasksModsSinksAndSpeculativeTokens) {
  uint64_t seed = 4300;
  for (int variant = 0; variant < 6; ++variant) {
    AttnCase c = gqa_decode_case(2, 1, 901, ++seed);
    c.kv = KvKind::kPaged;
    switch (variant) {
      case 0: c.softcap = 30.f; break;
      case 1: c.alibi = true; break;
      case 2: c.sinks = true; c.mask = Mask::sliding_window(100, 0); break;
      case 3: c.seqlens_q = {4, 4}; c.mask = Mask::causal(); break;  // 16 rows
      case 4: c.seqlens_q = {8, 8}; c.mask = Mask::causal(); c.sinks = true; break;  // 32 rows
      case 5: c.strided = true; c.row_pad = 16; c.kv = KvKind::kContiguous; break;  // padded rows
    }
    for (int splits : {1, 4}) {
      c.num_splits = splits;
      for (Fp8Scale kind : kKinds) check_fp8(c, kind);
    }
  }
}

// bf16 queries are scaled by a power of two into fp16 for the MMAs (fp8_q_exponent): queries far
// beyond fp16's range, and far below its normal range, give the reference's scores.
TEST(PortableDecodeFp8, Bf16QueriesOutsideFp16Range) {
  uint64_t seed = 4350;
  for (float mag : {1e5f, 1e-5f})
    for (Fp8Scale kind : {Fp8Scale::kTensor, Fp8Scale::kToken}) {
      AttnCase c = gqa_decode_case(3, 1, 700, ++seed);
      c.kv = KvKind::kPaged;
      c.qk_scale = mag;  // q and k ~ N(0, mag^2): logits back to N(0, 1) through the scale
      c.scale = 1.f / std::sqrt(static_cast<float>(c.dqk)) / (mag * mag);
      SCOPED_TRACE("magnitude " + std::to_string(mag));
      check_fp8(c, kind);
    }
}

TEST(PortableDecodeFp8, BitIdenticalReruns) {
  for (int splits : {1, 7}) {
    AttnCase c = gqa_decode_case(2, 2, 2000, 4400 + splits);
    c.kv = KvKind::kPaged;
    c.mask = Mask::causal();
    c.num_splits = splits;
    SCOPED_TRACE("splits " + std::to_string(splits));
    GpuRun r = run_fp8(c, Fp8Scale::kToken);
    expect_rerun_bit_identical(r, portable_opts());
  }
}

// The FP8 variants have no L2-streaming twin (decode_launch.cuh): a plan naming one is refused.
TEST(PortableDecodeFp8, PlanNamingAnL2StreamTwinIsRefused) {
  AttnCase c = gqa_decode_case(2, 1, 1, 4450);
  c.kv = KvKind::kPaged;
  AttnData h = make_attn_data(c);
  make_fp8_kv(h, Fp8Scale::kHead, 1);
  AttnData d = h.to(cuda());
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(d.args(), portable_opts(), &plan).ok());
  plan.kernel = plan.kernel.substr(0, plan.kernel.find('+')) + "+l2stream";
  const Status s = attention_forward(d.args(), portable_opts(), &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("L2-streaming twin"), std::string::npos) << s.message();
}

TEST(PortableDecodeFp8, ShapesTheDecodeKernelDoesNotHoldAreRefused) {
  for (int variant = 0; variant < 2; ++variant) {
    AttnCase c = gqa_decode_case(1, variant == 0 ? 64 : 1, 128, 4500);
    if (variant == 1) c.dqk = c.dv = 96;
    AttnData h = make_attn_data(c);
    make_fp8_kv(h, Fp8Scale::kHead, 1);
    AttnData d = h.to(cuda());
    AttentionPlan plan;
    ExecOptions auto_opts;  // the sm90 backend refuses FP8 caches too
    const Status s = plan_attention(d.args(), auto_opts, &plan);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_NE(s.message().find("FP8 KV cache in its decode kernel only"), std::string::npos)
        << s.message();
  }
}

// FP8 queries and [B, Hkv] scales have no CUDA kernel yet: refused, saying which.
TEST(PortableDecodeFp8, Fp8QueriesAndBatchHeadScalesAreRefused) {
  for (int variant = 0; variant < 2; ++variant) {
    AttnCase c = gqa_decode_case(2, 1, 300, 4600 + variant);
    AttnData h = make_attn_data(c);
    std::mt19937_64 rng(7);
    if (variant == 0) quantise_fp8(h.q, h.q_scale, Fp8Scale::kHead, c.hq, rng);
    quantise_fp8(h.k, h.k_scale, variant == 0 ? Fp8Scale::kHead : Fp8Scale::kBatchHead, c.hkv, rng);
    quantise_fp8(h.v, h.v_scale, Fp8Scale::kHead, c.hkv, rng);
    AttnData d = h.to(cuda());
    AttentionPlan plan;
    const Status s = plan_attention(d.args(), ExecOptions{}, &plan);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_NE(s.message().find(variant == 0 ? "FP8 queries" : "[B, Hkv]"), std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace attnkit::test
