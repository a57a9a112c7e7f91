// FP8 (e4m3) KV caches for tests: a case's K / V quantised in place, with random positive scales of
// one kind, and the values the FP8 path computes with (scale * e4m3) kept in fp32.
#pragma once

#include <random>
#include <vector>

#include "common/attention_case.h"
#include "cpu/half.h"

namespace attnkit::test {

// kBatchHead: [B, Hkv], FlashAttention-3's descale form (batched tensors [B, S, H, D] only).
enum class Fp8Scale { kTensor, kHead, kToken, kBatchHead };

inline const char* to_string(Fp8Scale k) {
  return k == Fp8Scale::kTensor ? "per-tensor"
         : k == Fp8Scale::kHead ? "per-head"
         : k == Fp8Scale::kToken ? "per-token"
                                 : "per-sequence-and-kv-head";
}

// Replaces x (a host Q, K or V with `heads` heads, padded rows allowed) by e4m3(x / scale) and sets
// scale: fp32 [1], [heads], x's shape without its last dim, or [B, kv_heads] (head h of sequence b
// reads [b, h / (heads / kv_heads)]). Returns scale * e4m3 in fp32, shaped like x's buffer.
inline testkit::Buffer quantise_fp8(ViewedBuffer& x, ViewedBuffer& scale, Fp8Scale kind, int64_t heads,
                                    std::mt19937_64& rng, int64_t kv_heads = 0) {
  const std::vector<int64_t> shape = x.buf.shape();
  const int64_t d = shape.back(), rows = x.buf.numel() / d;
  const std::vector<int64_t> view_shape(x.view.shape.begin(), x.view.shape.begin() + x.view.ndim);
  if (kv_heads == 0) kv_heads = heads;
  // Rows of one sequence in x's buffer (kBatchHead: batched [B, S, H, D], unpadded).
  const int64_t seq_rows = kind == Fp8Scale::kBatchHead ? shape[1] * shape[2] : 1;
  scale = whole(DType::kFloat32,
                kind == Fp8Scale::kTensor ? std::vector<int64_t>{1}
                : kind == Fp8Scale::kHead ? std::vector<int64_t>{heads}
                : kind == Fp8Scale::kToken
                    ? std::vector<int64_t>(view_shape.begin(), view_shape.end() - 1)
                    : std::vector<int64_t>{view_shape[0], kv_heads});
  testkit::fill_uniform(scale.buf, rng, 0.004f, 0.02f);
  const std::vector<float> xs = x.buf.to_float(), ss = scale.buf.to_float();
  std::vector<float> codes(xs.size()), values(xs.size());
  auto index = [&](int64_t r) -> int64_t {
    switch (kind) {
      case Fp8Scale::kTensor: return 0;
      case Fp8Scale::kHead: return r % heads;
      case Fp8Scale::kToken: return r;
      default: return (r / seq_rows) * kv_heads + (r % heads) / (heads / kv_heads);
    }
  };
  for (int64_t r = 0; r < rows; ++r) {
    const float s = ss[index(r)];
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

// View v's shape and strides over buffer b's data and dtype (e.g. the dequantised fp32 values).
inline TensorView like(const TensorView& v, const testkit::Buffer& b) {
  TensorView t = v;
  t.data = b.data();
  t.dtype = b.dtype();
  return t;
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
