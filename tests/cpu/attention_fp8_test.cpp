// FP8 attention (e4m3 Q, K and V; O bf16 / fp16) on the CPU reference: for each scale kind and
// layout, O and LSE are exactly what the same backend gives on fp32 Q / K / V holding the
// dequantised values (scale * e4m3), with O rounded once to its dtype, and the naive fp64
// reference agrees. FlashAttention-3's per-(sequence, KV head) descales [B, Hkv] are read the
// same way for Q, K and V (query head h takes KV head h / group's entry). Bad arguments are
// refused, naming them.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/attention_case.h"
#include "common/attention_check.h"
#include "common/fp8_kv.h"
#include "cpu_attention_util.h"
#include "cpu/half.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

struct Fp8Qkv {
  Buffer q, k, v;  // the dequantised values, fp32
};

// Quantises a host AttnData's Q (scale kind q_kind) and K / V (kv_kind).
Fp8Qkv make_fp8_qkv(AttnData& d, Fp8Scale q_kind, Fp8Scale kv_kind, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Fp8Qkv r;
  r.q = quantise_fp8(d.q, d.q_scale, q_kind, d.c.hq, rng, d.c.hkv);
  r.k = quantise_fp8(d.k, d.k_scale, kv_kind, d.c.hkv, rng);
  r.v = quantise_fp8(d.v, d.v_scale, kv_kind, d.c.hkv, rng);
  return r;
}

void expect_matches_dequantised(const AttnCase& c, Fp8Scale q_kind, Fp8Scale kv_kind) {
  SCOPED_TRACE(c.str() + " q " + to_string(q_kind) + ", k / v " + to_string(kv_kind));
  AttnData d = make_attn_data(c);
  const Fp8Qkv f = make_fp8_qkv(d, q_kind, kv_kind, c.seed + 100);

  AttentionArgs a = d.args();
  ASSERT_EQ(a.q.dtype, DType::kFloat8E4M3);
  Status st = attention_forward(a, cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();

  Buffer o32(DType::kFloat32, d.o.buf.shape()), lse32(DType::kFloat32, d.lse.buf.shape());
  AttentionArgs r = d.args();
  r.q = like(d.q.view, f.q);
  r.k = like(d.k.view, f.k);
  r.v = like(d.v.view, f.v);
  r.q_scale = r.k_scale = r.v_scale = {};
  r.o = like(d.o.view, o32);
  r.lse = like(d.lse.view, lse32);
  st = attention_forward(r, cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();

  const std::vector<float> o = read_view(a.o), want = read_view(r.o);
  for (size_t i = 0; i < o.size(); ++i)
    ASSERT_EQ(o[i], ref::round_to(c.dtype, want[i])) << "o element " << i;
  EXPECT_EQ(read_view(a.lse), read_view(r.lse));
  // And the naive fp64 reference, written from the definition, agrees.
  const Reference naive = naive_reference(d);
  expect_matches(d, naive, c.dtype == DType::kFloat16 ? testkit::kAttnFp16 : testkit::kAttnBf16,
                 testkit::kLse);
}

TEST(AttentionFp8, MatchesDequantisedInputsForEachScaleKind) {
  const Fp8Scale kinds[] = {Fp8Scale::kTensor, Fp8Scale::kHead, Fp8Scale::kToken,
                            Fp8Scale::kBatchHead};
  uint64_t seed = 300;
  for (Fp8Scale q_kind : kinds)
    for (Fp8Scale kv_kind : kinds) {
      AttnCase c = AttnCase::uniform(2, 37, 70);  // prefill: 37 queries against 70 keys
      c.hq = 8;
      c.hkv = 2;
      c.dqk = c.dv = 64;
      c.mask = Mask::causal();
      c.sinks = seed % 2 == 0;
      c.dtype = seed % 3 == 0 ? DType::kFloat16 : DType::kBFloat16;
      c.seed = ++seed;
      expect_matches_dequantised(c, q_kind, kv_kind);
    }
}

// Per-token and per-head scales over the other layouts: ragged Q and K, a paged cache.
TEST(AttentionFp8, RaggedAndPagedLayouts) {
  uint64_t seed = 400;
  for (Fp8Scale kind : {Fp8Scale::kHead, Fp8Scale::kToken}) {
    AttnCase c;
    c.seqlens_q = {5, 0, 17};
    c.seqlens_k = {40, 3, 90};
    c.ragged_q = true;
    c.kv = KvKind::kRagged;
    c.hq = 4;
    c.hkv = 4;
    c.dqk = c.dv = 128;
    c.mask = Mask::sliding_window(20, 0);
    c.seed = ++seed;
    expect_matches_dequantised(c, kind, kind);
    c.kv = KvKind::kPaged;
    c.page_size = 16;
    c.softcap = 30.f;
    c.seed = ++seed;
    expect_matches_dequantised(c, kind, kind);
  }
}

TEST(AttentionFp8, RefusesBadArguments) {
  AttnCase c = AttnCase::uniform(2, 4, 16);
  c.hq = 4;
  c.hkv = 2;
  const AttnData plain = make_attn_data(c);
  AttnData d = make_attn_data(c);
  make_fp8_qkv(d, Fp8Scale::kBatchHead, Fp8Scale::kHead, 1);
  auto expect_error = [](const AttentionArgs& a, const char* text) {
    const Status s = attention_forward(a, cpu_opts());
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  AttentionArgs a = d.args();
  ASSERT_TRUE(attention_forward(a, cpu_opts()).ok());
  a.q_scale = {};
  expect_error(a, "q_scale is required");
  Buffer three(DType::kFloat32, {3});
  a = d.args();
  a.q_scale = three.view();
  expect_error(a, "q_scale has shape [3]");
  a = d.args();
  a.k = plain.k.view;
  a.v = plain.v.view;
  a.k_scale = a.v_scale = {};
  expect_error(a, "FP8 attention needs fp8e4m3 k and v");
  Buffer o32(DType::kFloat32, d.o.buf.shape());
  a = d.args();
  a.o = like(d.o.view, o32);
  expect_error(a, "o (with fp8e4m3 q)");
  a = plain.args();
  a.q_scale = d.q_scale.view;
  expect_error(a, "q_scale is for fp8e4m3 q");
}

}  // namespace
}  // namespace attnkit::test
