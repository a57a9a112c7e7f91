// Writing new tokens into a paged KV cache: append_kv_cache (engines call it reshape_and_cache).
#pragma once

#include "attnkit/options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

// For every new token t whose slot s = slot_mapping[t] is not -1 (padding), with
// page = s / page_size and row = s % page_size, and every KV head h:
//   k_cache[page, row, h, :] = encode(k[t, h, :]),   v_cache[page, row, h, :] = encode(v[t, h, :]).
// The caches have attention_forward's paged layout [num_pages, page_size, Hkv, D], any strides with
// a contiguous last dimension: vLLM's HND layout [num_pages, Hkv, page_size, D] is passed as its
// permuted view.
//
// A cache of the new tokens' dtype (fp16 / bf16) stores them unchanged. An FP8 (e4m3) cache stores
//   encode(x) = e4m3(x / scale)  (round to nearest even, saturated to +-448),
// so that scale * e4m3 approximates x, with k_scale / v_scale (fp32) of one of three kinds:
//   per tensor            [1]                             read;
//   per KV head           [Hkv]                           read;
//   per (token, KV head)  [num_pages, page_size, Hkv]     any strides; written by this op for the
//       slots it fills: scale = max_d |x[t, h, d]| / 448 (1 for an all-zero row).
// Slots are in [0, num_pages * page_size) or -1, and no two tokens of one call share a slot. Slot
// indices on a CUDA device are checked only with ExecOptions::validate_device_indices; without it
// the kernel skips an out-of-range slot, so nothing is written out of bounds.
// Aliasing as in attention.h: k_cache and v_cache share no element with each other or with the
// inputs (interleaved K and V pages of one buffer, FlashInfer's layout, are fine).
// K alone: v and v_cache (and v_scale) not given, as for an MLA latent cache [num_pages,
// page_size, 1, 576] that attention reads as both K and V (its first 512 values a view).
struct AppendKvArgs {
  TensorView k;                 // [T, Hkv, Dk], fp16 / bf16
  TensorView v;                 // [T, Hkv, Dv], k's dtype; optional (with v_cache)
  TensorView slot_mapping;      // int32 [T]
  TensorView k_cache;           // [num_pages, page_size, Hkv, Dk]: k's dtype, or fp8e4m3
  TensorView v_cache;           // [num_pages, page_size, Hkv, Dv]: k_cache's dtype; optional
  TensorView k_scale, v_scale;  // fp32, FP8 caches only (kinds above; the two may differ)
};

Status append_kv_cache(const AppendKvArgs& args, const ExecOptions& opts = {});

}  // namespace attnkit
