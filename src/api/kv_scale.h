// Scales of FP8 (e4m3) K / V caches, shared by attention_forward (which reads them) and
// append_kv_cache (which writes per-token ones): one fp32 scale per tensor [1], per KV head [Hkv],
// or per (token, KV head), shaped like the cache without its last dimension.
#pragma once

#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit::detail {

// kNone: the cache is fp16 / bf16 and has no scale.
enum class KvScaleKind { kNone, kTensor, kHead, kToken };

// The kind of `scale` for a cache `cache` with `hkv` heads, on device `dev`: an error naming `name`
// when it is missing, not fp32, or shaped like none of the three.
Status kv_scale_kind(const TensorView& scale, const char* name, const TensorView& cache, int64_t hkv,
                     const Device& dev, KvScaleKind* kind);

// Largest finite e4m3 value: a per-token scale maps each row's largest magnitude onto it.
inline constexpr float kE4m3Max = 448.f;

}  // namespace attnkit::detail
