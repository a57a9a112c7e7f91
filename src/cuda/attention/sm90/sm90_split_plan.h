// Split-KV count of the Hopper prefill kernel when the caller leaves it to the library
// (AttentionArgs::num_splits = 0). Host-only and deterministic, from the request's shape and the
// SM count alone, so a plan made once can be reused, also under CUDA graph capture.
//
// The rule fills the grid the way the portable planner does (portable/planner.cu), with the sm90
// kernel's numbers: one CTA per SM (its shared memory allows no more), work tiles of
// sm90_q_block(Dqk) query rows of one head. A request with at least as many work tiles as SMs is
// left unsplit: every SM already streams keys, and splitting would only add the partials' traffic
// and the combine. Below that, each query tile is cut into as many splits as keep the launch to
// one whole wave (a second, partial wave would leave most SMs idle for its whole length), and no
// split gets fewer than kSm90MinKvTilesPerSplit KV tiles (the pipeline's fill, the Q load and the
// fp32 epilogue are paid per split). Measured with GQA 32/8 d128 at batch 1: 128 queries over
// 8k / 32k keys (32 work tiles) ran fastest with 4 splits, far ahead of one split; 512 queries
// (128 work tiles) fastest unsplit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/attention/sm90/sm90_fwd_params.h"

namespace attnkit::gpu {

// Fewest KV tiles a split gets from the automatic count.
constexpr int kSm90MinKvTilesPerSplit = 4;

struct Sm90SplitInput {
  int64_t work_tiles = 0;  // query tiles x query heads x batch, unsplit
  int64_t kv_tiles = 0;    // KV tiles the longest query tile sees
  int sm_count = 1;
  int requested = 0;  // AttentionArgs::num_splits: 0 = decide here
};

inline int sm90_split_count(const Sm90SplitInput& in) {
  // Asked for: honoured up to what the combine merges.
  if (in.requested > 0) return std::min(in.requested, kSm90MaxSplits);
  if (in.work_tiles <= 0 || in.work_tiles >= in.sm_count) return 1;
  int64_t splits = in.sm_count / in.work_tiles;
  splits = std::min<int64_t>({splits, in.kv_tiles / kSm90MinKvTilesPerSplit, kSm90MaxSplits});
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

// KV tiles the longest query tile of `q_block` rows sees, with `max_keys` keys in the longest
// sequence, under a mask of the API (window_left / window_right < 0: unbounded on that side;
// chunk_size > 0: queries see only keys of their chunk). An upper bound: enough for the rule.
inline int64_t sm90_kv_tiles_per_query_tile(int64_t max_keys, int q_block, int kv_block,
                                            int window_left, int window_right, int chunk_size) {
  int64_t keys = std::max<int64_t>(max_keys, 0);
  // A tile's rows span q_block positions, and each row sees at most left + right + 1 keys.
  if (window_left >= 0 && window_right >= 0)
    keys = std::min<int64_t>(keys, int64_t{q_block} + window_left + window_right);
  // Its first and last rows may sit in two different chunks.
  if (chunk_size > 0) keys = std::min<int64_t>(keys, int64_t{q_block} + 2 * int64_t{chunk_size});
  return (keys + kv_block - 1) / kv_block;
}

}  // namespace attnkit::gpu
