// Scales of FP8 (e4m3) tensors, shared by attention_forward (which reads them for Q, K and V) and
// append_kv_cache (which writes per-token ones): one fp32 scale per tensor [1], per head of the
// tensor [H], per (token, head), shaped like the tensor without its last dimension, or (attention
// only) per (sequence, KV head) [B, Hkv], FlashAttention-3's descale form.
#pragma once

#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit::detail {

// kNone: the tensor is fp16 / bf16 and has no scale.
enum class KvScaleKind { kNone, kTensor, kHead, kToken, kBatchHead };

// The kind of `scale` for the e4m3 tensor `t` with `heads` heads, on device `dev`: an error naming
// `name` when it is missing, not fp32, or shaped like none of the kinds. batch >= 0 also accepts
// [batch, kv_heads] (kBatchHead); a 2-D scale that is also `t`'s per-token shape is per token.
Status kv_scale_kind(const TensorView& scale, const char* name, const TensorView& t, int64_t heads,
                     int64_t batch, int64_t kv_heads, const Device& dev, KvScaleKind* kind);

// Largest finite e4m3 value: a per-token scale maps each row's largest magnitude onto it.
inline constexpr float kE4m3Max = 448.f;

}  // namespace attnkit::detail
