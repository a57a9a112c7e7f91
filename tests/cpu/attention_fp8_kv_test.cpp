// attention_forward with an FP8 (e4m3) KV cache on the CPU reference: for each KV layout and each
// scale kind, O and LSE are exactly what the same backend gives on fp32 K / V holding the dequantised
// values (scale * e4m3), with O rounded once to Q's dtype. Bad scale arguments are refused, naming
// them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/attention_case.h"
#include "common/fp8_kv.h"
#include "cpu_attention_util.h"
#include "cpu/half.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;
using Kind = Fp8Scale;

void expect_fp8_matches_dequantised(AttnCase c, Kind kind) {
  SCOPED_TRACE(c.str() + " scale kind " + std::to_string(static_cast<int>(kind)));
  c.dtype = DType::kBFloat16;
  AttnData d = make_attn_data(c);
  const Fp8Dequantised f = make_fp8_kv(d, kind, c.seed + 100);

  AttentionArgs a = d.args();
  Status st = attention_forward(a, cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();

  // The same call on fp32 q / K / V holding the values the FP8 path computes with.
  Buffer q32(DType::kFloat32, d.q.buf.shape()), o32(DType::kFloat32, d.o.buf.shape());
  q32.from_float(d.q.buf.to_float());
  Buffer lse32(DType::kFloat32, d.lse.buf.shape());
  AttentionArgs r = d.args();
  r.q = like(d.q.view, q32);
  r.k = like(d.k.view, f.k);
  r.v = like(d.v.view, f.v);
  r.k_scale = r.v_scale = {};
  r.o = like(d.o.view, o32);
  r.lse = like(d.lse.view, lse32);
  st = attention_forward(r, cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();

  const std::vector<float> o = read_view(a.o), want = read_view(r.o);
  for (size_t i = 0; i < o.size(); ++i)
    ASSERT_EQ(o[i], ref::round_to(DType::kBFloat16, want[i])) << "o element " << i;
  EXPECT_EQ(read_view(a.lse), read_view(r.lse));
}

TEST(AttentionFp8Kv, MatchesDequantisedCacheForEachLayoutAndScaleKind) {
  for (Kind kind : {Kind::kTensor, Kind::kHead, Kind::kToken}) {
    AttnCase c = AttnCase::uniform(2, 1, 70);
    c.hq = 8;
    c.hkv = 2;
    c.dqk = c.dv = 128;
    c.kv = KvKind::kContiguous;
    expect_fp8_matches_dequantised(c, kind);
    c.kv = KvKind::kPaged;
    c.seqlens_k = {70, 33};
    expect_fp8_matches_dequantised(c, kind);
    c.kv = KvKind::kRagged;
    c.ragged_q = true;
    c.seqlens_q = {5, 9};
    c.mask = Mask::causal();
    expect_fp8_matches_dequantised(c, kind);
  }
}

TEST(AttentionFp8Kv, RefusesBadScales) {
  AttnCase c = AttnCase::uniform(1, 1, 16);
  const AttnData plain = make_attn_data(c);
  AttnData d = make_attn_data(c);
  make_fp8_kv(d, Kind::kHead, 1);
  auto fp8_args = [&] { return d.args(); };
  auto expect_error = [](const AttentionArgs& a, const char* text) {
    const Status s = attention_forward(a, cpu_opts());
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  AttentionArgs a = fp8_args();
  a.v_scale = {};
  expect_error(a, "v_scale is required");
  Buffer three(DType::kFloat32, {3});
  a = fp8_args();
  a.k_scale = three.view();
  expect_error(a, "k_scale has shape [3]");
  a = plain.args();
  a.k_scale = d.k_scale.view;
  expect_error(a, "k_scale / v_scale are for fp8e4m3");
  a = fp8_args();
  a.v = plain.v.view;
  expect_error(a, "v has dtype");
}

}  // namespace
}  // namespace attnkit::test
