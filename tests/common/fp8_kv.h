// FP8 (e4m3) KV caches for tests: a case's K / V quantised in place, with random positive scales of
// one kind, and the values the FP8 path computes with (scale * e4m3) kept in fp32.
#pragma once

#include <random>
#include <vector>

#include "common/attention_case.h"
#include "cpu/half.h"

namespace attnkit::test {

enum class Fp8Scale { kTensor, kHead, kToken };

inline const char* to_string(Fp8Scale k) {
  return k == Fp8Scale::kTensor ? "per-tensor" : k == Fp8Scale::kHead ? "per-head" : "per-token";
}

// Replaces x (a host K or V, padded rows allowed) by e4m3(x / scale) and sets scale: fp32 [1],
// [Hkv], or x's shape without its last dim. Returns scale * e4m3 in fp32, shaped like x's buffer.
inline testkit::Buffer quantise_fp8(ViewedBuffer& x, ViewedBuffer& scale, Fp8Scale kind, int64_t hkv,
                                    std::mt19937_64& rng) {
  const std::vector<int64_t> shape = x.buf.shape();
  const int64_t d = shape.back(), rows = x.buf.numel() / d;
  const std::vector<int64_t> view_shape(x.view.shape.begin(), x.view.shape.begin() + x.view.ndim);
  scale = whole(DType::kFloat32,
                kind == Fp8Scale::kTensor ? std::vector<int64_t>{1}
                : kind == Fp8Scale::kHead ? std::vector<int64_t>{hkv}
                                          : std::vector<int64_t>(view_shape.begin(), view_shape.end() - 1));
  testkit::fill_uniform(scale.buf, rng, 0.004f, 0.02f);
  const std::vector<float> xs = x.buf.to_float(), ss = scale.buf.to_float();
  std::vector<float> codes(xs.size()), values(xs.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float s = ss[kind == Fp8Scale::kTensor ? 0 : kind == Fp8Scale::kHead ? r % hkv : r];
    for (int64_t i = 0; i < d; ++i) {
      const float c = ref::round_to(DType::kFloat8E4M3, xs[r * d + i] / s);
      codes[r * d + i] = c;
      values[r * d + i] = s * c;
    }
  }
  x.buf = testkit::Buffer(DType::kFloat8E4M3, shape);
  x.buf.from_float(codes);
  x.view.data = x.buf.data();
  x.view.dtype = DType::kFloat8E4M3;
  testkit::Buffer deq(DType::kFloat32, shape);
  deq.from_float(values);
  return deq;
}

struct Fp8Dequantised {
  testkit::Buffer k, v;
};

// Quantises a host AttnData's K and V (scales of `kind` into d.k_scale / d.v_scale).
inline Fp8Dequantised make_fp8_kv(AttnData& d, Fp8Scale kind, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Fp8Dequantised r;
  r.k = quantise_fp8(d.k, d.k_scale, kind, d.c.hkv, rng);
  r.v = quantise_fp8(d.v, d.v_scale, kind, d.c.hkv, rng);
  return r;
}

}  // namespace attnkit::test
