// Score-modifier and sink policies of the Hopper prefill kernel (compile-time types, one per
// instantiation in sm90_fwd_list.h).
//
// Score mod: the kernel's online softmax works on t = apply(q·k) and takes exp2(t·factor - max),
// so a modifier is an in-place map of the raw S tile plus the factor that turns its result into
// log2 units:
//   ScoreNone:   t = s,                          factor = scale·log2e;
//   ScoreSoftcap t = tanh(s·scale / cap),        factor = cap·log2e   (cap·tanh(s·scale/cap), the
//                                                API's softcap on the scaled score).
// The mask is applied after the modifier (a hidden key must become -inf, not cap·tanh(-inf)).
//
// Sinks: one logit per query head added to the softmax denominator only (no value). SinkNone
// compiles to the plain epilogue; SinkLearned folds exp(sink) into each row's sum there.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

namespace attnkit::gpu::sm90 {

inline constexpr float kSm90Log2e = 1.4426950408889634f;

struct ScoreNone {
  static constexpr const char* kName = "";
  float factor;  // scale·log2e
  template <class Params>
  __host__ __device__ static ScoreNone make(const Params& p) { return {p.scale * kSm90Log2e}; }
  template <class Tensor>
  __device__ __forceinline__ void apply(Tensor&) const {}
};

struct ScoreSoftcap {
  static constexpr const char* kName = "_softcap";
  float factor;     // cap·log2e
  float pre_log2;   // 2·log2e·scale / cap: tanh(x) = 1 - 2 / (exp2(2·log2e·x) + 1)
  template <class Params>
  __host__ __device__ static ScoreSoftcap make(const Params& p) {
    return {p.softcap * kSm90Log2e, 2.f * kSm90Log2e * p.scale / p.softcap};
  }
  // tanh through exp2 and a fast divide: the error is absolute (~1e-7), so after the cap's scaling
  // it stays far below the logit error bf16 inputs already have; tanh.approx's relative 2^-11
  // would not (0.02 at a cap of 50). Saturates to +-1 without NaN (exp2 -> inf gives 2/inf = 0).
  template <class Tensor>
  __device__ __forceinline__ void apply(Tensor& s) const {
    #pragma unroll
    for (int i = 0; i < cute::size(s); ++i)
      s(i) = 1.f - __fdividef(2.f, exp2f(s(i) * pre_log2) + 1.f);
  }
};

struct SinkNone {
  static constexpr bool kEnabled = false;
  static constexpr const char* kName = "";
  __device__ __forceinline__ float log2_sink(int) const { return 0.f; }
};

struct SinkLearned {
  static constexpr bool kEnabled = true;
  static constexpr const char* kName = "_sinks";
  const float* sinks;  // fp32 [Hq], natural-log logits
  int64_t stride;
  __device__ __forceinline__ float log2_sink(int head) const {
    return __ldg(sinks + head * stride) * kSm90Log2e;
  }
};

}  // namespace attnkit::gpu::sm90
