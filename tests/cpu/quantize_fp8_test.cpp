// quantize_fp8 (include/attnkit/quantize.h) on the CPU: for each scale kind and a strided input,
// every scale is its group's max |x| / 448 (1 for an all-zero group), every code is x / scale
// rounded to e4m3, the group's largest magnitude lands on +-448, and scale * code stays within
// e4m3's rounding of x. Its output feeds FP8 attention, which then agrees with bf16 attention
// within FP8's error. Bad arguments are refused, naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attnkit/quantize.h"
#include "common/attention_case.h"
#include "cpu/half.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

enum class Kind { kTensor, kHead, kToken };

// x [2, 5, 4, 32] as a view with rows padded to 40 elements; heads 4.
struct Input {
  Buffer buf;
  TensorView x;
};
Input make_input(uint64_t seed) {
  Input in;
  in.buf = Buffer(DType::kBFloat16, {2, 5, 4, 40});
  std::mt19937_64 rng(seed);
  testkit::fill_normal(in.buf, rng, 0.f, 3.f);
  std::vector<float> v = in.buf.to_float();
  for (int64_t i = 0; i < 40; ++i) v[(1 * 5 * 4 + 2 * 4 + 3) * 40 + i] = 0.f;  // an all-zero row
  in.buf.from_float(v);
  in.x = in.buf.view();
  in.x.shape[3] = 32;
  return in;
}

std::vector<int64_t> scale_shape(Kind k) {
  return k == Kind::kTensor ? std::vector<int64_t>{1}
         : k == Kind::kHead ? std::vector<int64_t>{4}
                            : std::vector<int64_t>{2, 5, 4};
}

TEST(QuantizeFp8, ScalesCodesAndRoundTripForEachKind) {
  for (Kind kind : {Kind::kTensor, Kind::kHead, Kind::kToken}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const Input in = make_input(11 + static_cast<int>(kind));
    Buffer out(DType::kFloat8E4M3, {2, 5, 4, 32}), scale(DType::kFloat32, scale_shape(kind));
    QuantizeFp8Args a;
    a.x = in.x;
    a.out = out.view();
    a.scale = scale.view();
    const Status st = quantize_fp8(a);
    ASSERT_TRUE(st.ok()) << st.message();

    const std::vector<float> xs = in.buf.to_float(), codes = out.to_float(), ss = scale.to_float();
    const int64_t rows = 2 * 5 * 4;
    auto group = [&](int64_t r) {
      return kind == Kind::kTensor ? 0 : kind == Kind::kHead ? r % 4 : r;
    };
    std::vector<float> amax(static_cast<size_t>(rows), 0.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < 32; ++i)
        amax[group(r)] = std::max(amax[group(r)], std::fabs(xs[r * 40 + i]));
    for (int64_t r = 0; r < rows; ++r) {
      const float s = ss[group(r)];
      ASSERT_EQ(s, amax[group(r)] > 0.f ? amax[group(r)] / 448.f : 1.f) << "row " << r;
      for (int64_t i = 0; i < 32; ++i) {
        const float x = xs[r * 40 + i], c = codes[r * 32 + i];
        ASSERT_EQ(c, ref::round_to(DType::kFloat8E4M3, x / s)) << "row " << r << " col " << i;
        EXPECT_LE(std::fabs(s * c - x), std::fabs(x) / 16.f + s / 1024.f) << "row " << r;
        if (std::fabs(x) == amax[group(r)] && x != 0.f) EXPECT_EQ(std::fabs(c), 448.f);
      }
    }
    if (kind == Kind::kToken) EXPECT_EQ(ss[1 * 20 + 2 * 4 + 3], 1.f) << "all-zero row";
  }
}

// Q, K and V quantised per token feed FP8 attention, which then agrees with the bf16 call.
TEST(QuantizeFp8, FeedsFp8Attention) {
  AttnCase c = AttnCase::uniform(2, 40, 96);
  c.hq = 4;
  c.hkv = 2;
  c.dqk = c.dv = 64;
  c.mask = Mask::causal();
  AttnData d = make_attn_data(c);
  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  ASSERT_TRUE(attention_forward(d.args(), cpu).ok());
  const std::vector<float> want = read_view(d.o.view);

  auto quantise = [](const TensorView& x, Buffer& out, Buffer& scale) {
    std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + x.ndim);
    out = Buffer(DType::kFloat8E4M3, shape);
    shape.pop_back();
    scale = Buffer(DType::kFloat32, shape);
    QuantizeFp8Args a;
    a.x = x;
    a.out = out.view();
    a.scale = scale.view();
    return quantize_fp8(a);
  };
  Buffer q8, k8, v8, qs, ks, vs;
  ASSERT_TRUE(quantise(d.q.view, q8, qs).ok());
  ASSERT_TRUE(quantise(d.k.view, k8, ks).ok());
  ASSERT_TRUE(quantise(d.v.view, v8, vs).ok());
  Buffer o(DType::kBFloat16, d.o.buf.shape());
  AttentionArgs a = d.args();
  a.q = q8.view();
  a.k = k8.view();
  a.v = v8.view();
  a.q_scale = qs.view();
  a.k_scale = ks.view();
  a.v_scale = vs.view();
  a.o = o.view();
  a.lse = {};
  const Status st = attention_forward(a, cpu);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> got = o.to_float();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.08) << "rel L2 of FP8 attention against bf16";
  EXPECT_GT(std::sqrt(num / den), 0.0) << "FP8 rounding must show";
}

TEST(QuantizeFp8, RefusesBadArguments) {
  const Input in = make_input(5);
  Buffer out(DType::kFloat8E4M3, {2, 5, 4, 32}), scale(DType::kFloat32, {4});
  Buffer out16(DType::kBFloat16, {2, 5, 4, 32}), seven(DType::kFloat32, {7});
  Buffer small(DType::kFloat8E4M3, {2, 5, 4, 16});
  auto expect_error = [](QuantizeFp8Args a, const char* text) {
    const Status s = quantize_fp8(a);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  QuantizeFp8Args a{in.x, out.view(), scale.view()};
  ASSERT_TRUE(quantize_fp8(a).ok());
  expect_error({in.x, out16.view(), scale.view()}, "out has dtype");
  expect_error({in.x, small.view(), scale.view()}, "out has shape");
  expect_error({in.x, out.view(), seven.view()}, "scale has shape [7]");
  expect_error({in.x, out.view(), {}}, "scale");
  expect_error({out.view(), out.view(), scale.view()}, "x has dtype");
}

}  // namespace
}  // namespace attnkit::test
