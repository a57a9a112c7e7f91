// Score-modifier policies: turn a raw dot product q.k into the logit the softmax uses, in log2
// units (the kernels use exp2). The scale is folded in here, so NoScoreMod is one multiply.
// Sinks and the LSE are handled in the kernels' epilogues, not here.
#pragma once

#include "cuda/attention/portable/fwd_params.h"

namespace attnkit::gpu {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

struct NoScoreMod {
  static constexpr const char* kName = "nomod";
  float scale_log2;
  __device__ explicit NoScoreMod(const FwdParams& p) : scale_log2(p.scale_log2) {}
  // Per-row state (ALiBi slope); nothing here.
  struct Row {};
  __device__ __forceinline__ Row row(const FwdParams&, int /*head*/) const { return {}; }
  __device__ __forceinline__ float apply(float s, const Row&, int /*p*/, int /*j*/) const {
    return s * scale_log2;
  }
};

// Softcap (cap * tanh(s / cap) on the scaled score) then ALiBi (- slope[h] * |p - j|), both
// optional at run time.
struct SoftcapAlibiMod {
  static constexpr const char* kName = "mod";
  float scale, softcap, inv_softcap;
  bool has_alibi;
  __device__ explicit SoftcapAlibiMod(const FwdParams& p)
      : scale(p.scale),
        softcap(p.softcap),
        inv_softcap(p.softcap > 0.f ? 1.f / p.softcap : 0.f),
        has_alibi(p.alibi != nullptr) {}
  struct Row {
    float slope;
  };
  __device__ __forceinline__ Row row(const FwdParams& p, int head) const {
    return {has_alibi ? __ldg(p.alibi + head * p.alibi_stride) : 0.f};
  }
  __device__ __forceinline__ float apply(float s, const Row& r, int p, int j) const {
    s *= scale;
    if (softcap > 0.f) s = softcap * tanhf(s * inv_softcap);
    if (has_alibi) s -= r.slope * fabsf(static_cast<float>(p - j));
    return s * kLog2e;
  }
};

}  // namespace attnkit::gpu
