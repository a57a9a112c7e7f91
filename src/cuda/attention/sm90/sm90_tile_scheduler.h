// Work tiles of the Hopper prefill kernel (one tile = kBlockM query rows of one (batch, head)),
// and the schedulers that hand them out. The kernel loops: CTA `cta` takes tile
// tile_index(cta, round, grid) in round 0, 1, ... until the index passes num_tiles().
//
// PersistentScheduler (no mask): one CTA per SM, each taking one tile per round, so the producer
//   loads the next tile's Q/K/V while the consumers finish the current one, and a short sequence
//   does not pay a CTA launch, prologue and epilogue per tile. Order: query tiles fastest, then
//   heads, then batch, so the CTAs resident at once work on one or two heads, whose K and V stay
//   in L2. All tiles cost the same, so a static round robin is balanced.
// LongestFirstScheduler (causal, d128/d256): one CTA per tile, query tiles from the last
//   (longest) to the first, then heads, then batch. Causal tiles cost from one key block to the whole row; the
//   hardware hands each CTA to the first SM that frees up, which balances them with no counter in
//   a workspace. (A static persistent order measured slower for causal at d128/256: per-CTA work
//   differed and K/V locality suffered.)
// PersistentLongestFirstScheduler (causal, head dim 64): persistent again, because at d64 a tile is
//   so short that the per-CTA prologue/epilogue dominates (measured faster than one CTA per tile
//   at 512-1k tokens). Order: heads fastest, then query tiles longest
//   first, then batch; rounds alternate direction ("snake": CTA c takes r·grid + c on even rounds,
//   r·grid + grid-1-c on odd ones), as a plain round robin would give CTA 0 the longest tile of
//   every round.
// PersistentCausalPairScheduler (causal, batched, up to 8k query rows; below): persistent, a
//   long and a short query tile of one head per CTA, two rounds at a time.
// VarlenScheduler (ragged Q: cu_seqlens_q; K may be ragged or cut by seqused_k too): persistent,
//   over a virtual grid of query tiles sized by the longest sequence (tiles past a sequence's end
//   are skipped by the kernel in a few instructions). Order: heads fastest, then batch, then query
//   tiles from the last to the first, with snake rounds: the deepest query tiles exist only in the
//   longest sequences and (causal) see the most keys, so the longest work goes first and the short
//   tiles fill the end. The lengths live on the device, so no host-side sort is possible.
// WithVarlen<S>: the scheduler a kernel carries: S when Q is batched (also with per-sequence key
//   counts: ragged K, seqused_k, paged K/V), VarlenScheduler when Q is ragged (a run-time choice:
//   no extra instantiation). Split-KV (num_splits > 1) multiplies the work tiles: the split is
//   the fastest factor of the index, so the splits of one query tile run side by side (on
//   neighbouring CTAs, or launched together) and keep the order above between query tiles.
//   num_splits is a run-time value too (sm90_split_plan.h picks it when the caller does not).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/fast_divmod.h"

#if defined(__CUDACC__)
#define ATTNKIT_SM90_HD __host__ __device__ __forceinline__
#else
#define ATTNKIT_SM90_HD inline
#endif

namespace attnkit::gpu::sm90 {

struct WorkTile {
  int m_block;
  int head;
  int batch;
  int split = 0;  // which share of the query tile's KV tiles (split-KV), else 0
};

struct PersistentScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;

  ATTNKIT_SM90_HD int num_tiles() const { return num_m_blocks * num_heads * num_batch; }
  static int grid(int num_tiles, int sms) { return num_tiles < sms ? num_tiles : sms; }
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const { return round * grid + cta; }
  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    WorkTile t;
    t.m_block = idx % num_m_blocks;
    idx /= num_m_blocks;
    t.head = idx % num_heads;
    t.batch = idx / num_heads;
    return t;
  }
};

struct LongestFirstScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;

  ATTNKIT_SM90_HD int num_tiles() const { return num_m_blocks * num_heads * num_batch; }
  static int grid(int num_tiles, int /*sms*/) { return num_tiles; }
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const { return round * grid + cta; }
  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    WorkTile t;
    t.m_block = num_m_blocks - 1 - idx % num_m_blocks;
    idx /= num_m_blocks;
    t.head = idx % num_heads;
    t.batch = idx / num_heads;
    return t;
  }
};

struct PersistentLongestFirstScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;

  ATTNKIT_SM90_HD int num_tiles() const { return num_m_blocks * num_heads * num_batch; }
  static int grid(int num_tiles, int sms) { return num_tiles < sms ? num_tiles : sms; }
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const {
    return round * grid + ((round & 1) ? grid - 1 - cta : cta);
  }
  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    WorkTile t;
    t.head = idx % num_heads;
    idx /= num_heads;
    t.m_block = num_m_blocks - 1 - idx % num_m_blocks;
    t.batch = idx / num_m_blocks;
    return t;
  }
};

// PersistentCausalPairScheduler (causal): persistent, each CTA taking the query tiles of one
// (batch, head) in pairs, the j-th longest then the j-th shortest (m = M-1-j, then m = j), whose KV
// tiles add up to about M + 1 whatever j: a static round robin over pairs is then balanced (the
// plain longest-first order above repeats per batch, about once per round, so the snake does not
// even it out), and the pair's two tiles share K/V in L2. Order: pairs fastest, then heads, then
// batch. With an odd M the middle tile is alone: its pair's second slot is m = M, past the
// sequence's end, which the kernel skips. (With split-KV the split is the fastest factor of the
// index, so the two rounds take two splits instead: every piece still runs once.)
struct PersistentCausalPairScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;

  ATTNKIT_SM90_HD int num_pairs() const { return (num_m_blocks + 1) / 2; }
  ATTNKIT_SM90_HD int num_tiles() const { return 2 * num_pairs() * num_heads * num_batch; }
  static int grid(int num_tiles, int sms) {
    const int pairs = (num_tiles + 1) / 2;
    return pairs < sms ? pairs : sms;
  }
  // Rounds 2r and 2r + 1 of a CTA are the two tiles of its pair r·grid + cta.
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const {
    return ((round >> 1) * grid + cta) * 2 + (round & 1);
  }
  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    WorkTile t;
    const int second = idx & 1;
    idx >>= 1;
    const int pairs = num_pairs();
    const int j = idx % pairs;
    idx /= pairs;
    const int longer = num_m_blocks - 1 - j;
    t.m_block = !second ? longer : (j == longer ? num_m_blocks : j);
    t.head = idx % num_heads;
    t.batch = idx / num_heads;
    return t;
  }
};

// Whether the pair grid fills the GPU: it runs one CTA per pair of 128-row query tiles, so with
// fewer pairs than SMs it leaves SMs idle that one CTA per tile would use (GQA 32/8 d128 causal,
// 512 queries x 8192 keys, 64 pairs: one CTA per tile measured much faster). The shapes where
// pairs were measured faster have 4 or more pairs per SM.
inline bool causal_pairs_fill(int64_t q_rows, int64_t heads_times_batch, int sms) {
  const int64_t pairs = ((q_rows + 127) / 128 + 1) / 2 * heads_times_batch;
  return pairs >= sms;
}

struct VarlenScheduler {
  int num_m_blocks = 0;  // query tiles of the longest sequence
  int num_heads = 0;
  int num_batch = 0;

  ATTNKIT_SM90_HD int num_tiles() const { return num_m_blocks * num_heads * num_batch; }
  static int grid(int num_tiles, int sms) { return num_tiles < sms ? num_tiles : sms; }
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const {
    return round * grid + ((round & 1) ? grid - 1 - cta : cta);
  }
  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    WorkTile t;
    t.head = idx % num_heads;
    idx /= num_heads;
    t.batch = idx % num_batch;
    t.m_block = num_m_blocks - 1 - idx / num_batch;
    return t;
  }
};

template <class Fixed>
struct WithVarlen {
  Fixed fixed;
  VarlenScheduler varlen;
  int use_varlen = 0;
  // Split-KV splits per query tile; a multiply-shift (exact below 2^31 tiles), as the producer
  // has 24 registers and an integer divide needs more.
  FastDiv num_splits{1};

  ATTNKIT_SM90_HD int num_tiles() const {
    return (use_varlen ? varlen.num_tiles() : fixed.num_tiles()) * num_splits.d;
  }
  int grid(int num_tiles, int sms) const {
    return use_varlen ? VarlenScheduler::grid(num_tiles, sms) : Fixed::grid(num_tiles, sms);
  }
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const {
    return use_varlen ? varlen.tile_index(cta, round, grid) : fixed.tile_index(cta, round, grid);
  }
  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    int inner, split;
    num_splits.divmod(idx, inner, split);
    WorkTile t = use_varlen ? varlen.tile(inner) : fixed.tile(inner);
    t.split = split;
    return t;
  }
};

// The scheduler of each variant (chosen on the FlashAttention-3 paper shapes). Causal at d64,
// d128 and d256 takes PersistentCausalPairScheduler instead for batched contiguous K/V up to 8192
// query rows (1024 at d64) where the pairs fill the SMs (causal_pairs_fill; sm90_dispatch.cu).
template <int kHeadDim, bool kCausal>
using SchedulerFor = std::conditional_t<
    !kCausal, PersistentScheduler,
    std::conditional_t<kHeadDim == 64, PersistentLongestFirstScheduler, LongestFirstScheduler>>;

}  // namespace attnkit::gpu::sm90

#undef ATTNKIT_SM90_HD
