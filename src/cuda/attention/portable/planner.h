// Split-KV planning for the portable kernels: how many slices of the key range each row tile is
// cut into, so that small batches (decode with batch 1) still put work on every SM. Host-only and
// deterministic: a plan made once can be reused, also under CUDA graph capture.
#pragma once

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

}  // namespace attnkit::detail
