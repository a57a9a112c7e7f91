// Split-KV planning for the portable kernels: how many slices of the key range each row tile is
// cut into, so that small batches (decode with batch 1) still put work on every SM. Host-only and
// deterministic: a plan made once can be reused, also under CUDA graph capture.
#pragma once

#include <cstdint>

namespace attnkit::detail {

struct PlanInput {
  int batch = 0, hkv = 0, group = 1;
  int max_seqlen_q = 0, max_seqlen_k = 0;
  int block_m = 64, block_n = 64;
  int sm_count = 1;
  int requested_splits = 0;  // AttentionArgs::num_splits: 0 = decide here
};

int plan_num_splits(const PlanInput& in);

// The decode kernel: one CTA per (sequence, KV head, split) holds every query row of the head.
struct DecodePlanInput {
  int batch = 0, hkv = 0;
  int max_seqlen_k = 0;
  int block_n = 32;     // split granularity in keys (a 4-warp tile's stage; 8-warp tiles: 64)
  int ctas_per_sm = 2;  // decode CTAs resident per SM
  int sm_count = 1;
  int requested_splits = 0;  // AttentionArgs::num_splits: 0 = decide here
  int max_splits = 128;      // what the in-kernel merge takes
};

int plan_decode_splits(const DecodePlanInput& in);

// Whether a decode call reads its K/V evict-first in L2 (the decode kernel's KvL2Stream policy;
// otherwise the default policy). A call starts with L2 full of other lines (dirty ones, in the
// benchmark: its 256 MB flush), and default-policy fills evict them, writing the dirty ones back.
// Evict-first measured faster while K/V is at most about 5 x L2 and slower from about 10 x L2,
// where the write-back is a small share of the traffic (GQA 32/8, d128, bf16, every shape of
// `attnkit bench --shapes decode`). The cut sits between, at 8 x L2. kv_bytes: the most the call
// may read (a bound: near the cut either policy is within a few percent).
inline bool decode_l2_stream(int64_t kv_bytes, int64_t l2_bytes) {
  return l2_bytes > 0 && kv_bytes <= 8 * l2_bytes;
}

// Whether a decode call is better served by the Hopper (TMA) decode kernel than by the decode
// kernel's thread copies: where each split reads at least kTmaDecodeMinKeys keys. Below that the
// TMA ring's fill, paid once per split, outweighs its faster streaming (the cut is measured:
// bench/RESULTS.md).
inline constexpr int kTmaDecodeMinKeys = 4096;
inline bool tma_decode_pays(int max_seqlen_k, int splits) {
  const int64_t s = splits > 1 ? splits : 1;
  return (int64_t{max_seqlen_k} + s - 1) / s >= kTmaDecodeMinKeys;
}

}  // namespace attnkit::detail
