// attention_forward with an FP8 (e4m3) KV cache on the CPU reference: for each KV layout and each
// scale kind, O and LSE are exactly what the same backend gives on fp32 K / V holding the dequantised
// values (scale * e4m3), with O rounded once to Q's dtype. Bad scale arguments are refused, naming
// them, and a CUDA request says that no kernel reads FP8 caches yet.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/attention_case.h"
#include "cpu/half.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

enum class Kind { kTensor, kHead, kToken };

struct Fp8Kv {
  Buffer k8, v8, ks, vs, kdeq, vdeq;  // e4m3 caches, scales, and the dequantised fp32 caches
};

// One cache side: random positive scales of `kind`, e4m3(x / scale), and scale * e4m3 in fp32.
void quantise(const ViewedBuffer& x, Kind kind, int64_t hkv, std::mt19937_64& rng, Buffer* q8,
              Buffer* scale, Buffer* deq) {
  const std::vector<int64_t>& shape = x.buf.shape();
  const int64_t d = shape.back(), rows = x.buf.numel() / d;
  std::vector<int64_t> sshape = kind == Kind::kTensor ? std::vector<int64_t>{1}
                                : kind == Kind::kHead ? std::vector<int64_t>{hkv}
                                                      : std::vector<int64_t>(shape.begin(), shape.end() - 1);
  *scale = Buffer(DType::kFloat32, sshape);
  testkit::fill_uniform(*scale, rng, 0.004f, 0.02f);
  const std::vector<float> xs = x.buf.to_float(), ss = scale->to_float();
  std::vector<float> codes(xs.size()), values(xs.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float s = ss[kind == Kind::kTensor ? 0 : kind == Kind::kHead ? r % hkv : r];
    for (int64_t i = 0; i < d; ++i) {
      const float c = ref::round_to(DType::kFloat8E4M3, xs[r * d + i] / s);
      codes[r * d + i] = c;
      values[r * d + i] = s * c;
    }
  }
  *q8 = Buffer(DType::kFloat8E4M3, shape);
  q8->from_float(codes);
  *deq = Buffer(DType::kFloat32, shape);
  deq->from_float(values);
}

TensorView like(const TensorView& v, const Buffer& b) {
  TensorView t = v;
  t.data = b.data();
  t.dtype = b.dtype();
  return t;
}

ExecOptions cpu_opts() {
  ExecOptions o;
  o.backend = Backend::kCPU;
  o.cpu_threads = 2;
  return o;
}

void expect_fp8_matches_dequantised(AttnCase c, Kind kind) {
  SCOPED_TRACE(c.str() + " scale kind " + std::to_string(static_cast<int>(kind)));
  c.dtype = DType::kBFloat16;
  AttnData d = make_attn_data(c);
  std::mt19937_64 rng(c.seed + 100);
  Fp8Kv f;
  quantise(d.k, kind, c.hkv, rng, &f.k8, &f.ks, &f.kdeq);
  quantise(d.v, kind, c.hkv, rng, &f.v8, &f.vs, &f.vdeq);

  AttentionArgs a = d.args();
  a.k = like(d.k.view, f.k8);
  a.v = like(d.v.view, f.v8);
  a.k_scale = f.ks.view();
  a.v_scale = f.vs.view();
  Status st = attention_forward(a, cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();

  // The same call on fp32 q / K / V holding the values the FP8 path computes with.
  Buffer q32(DType::kFloat32, d.q.buf.shape()), o32(DType::kFloat32, d.o.buf.shape());
  q32.from_float(d.q.buf.to_float());
  Buffer lse32(DType::kFloat32, d.lse.buf.shape());
  AttentionArgs r = d.args();
  r.q = like(d.q.view, q32);
  r.k = like(d.k.view, f.kdeq);
  r.v = like(d.v.view, f.vdeq);
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

TEST(AttentionFp8Kv, RefusesBadScalesAndCuda) {
  AttnCase c = AttnCase::uniform(1, 1, 16);
  AttnData d = make_attn_data(c);
  std::mt19937_64 rng(1);
  Fp8Kv f;
  quantise(d.k, Kind::kHead, c.hkv, rng, &f.k8, &f.ks, &f.kdeq);
  quantise(d.v, Kind::kHead, c.hkv, rng, &f.v8, &f.vs, &f.vdeq);
  auto fp8_args = [&] {
    AttentionArgs a = d.args();
    a.k = like(d.k.view, f.k8);
    a.v = like(d.v.view, f.v8);
    a.k_scale = f.ks.view();
    a.v_scale = f.vs.view();
    return a;
  };
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
  a = d.args();
  a.k_scale = f.ks.view();
  expect_error(a, "k_scale / v_scale are for fp8e4m3");
  a = fp8_args();
  a.v = d.v.view;
  expect_error(a, "v has dtype");
  a = fp8_args();
  a.q.device = a.k.device = a.v.device = a.o.device = a.lse.device = a.k_scale.device =
      a.v_scale.device = cuda();
  ExecOptions o;
  const Status s = attention_forward(a, o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no CUDA kernel reads an FP8 KV cache"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace attnkit::test
