// Work tiles of the persistent Hopper prefill kernel: one tile = kBlockM query rows of one
// (batch, head).
// The grid has at most one CTA per SM and each CTA takes one tile per round, so the producer can
// load the next tile's Q/K/V while the consumers finish the current one, and a short sequence
// does not pay a CTA launch, prologue and epilogue per tile.
//
// Order (tile index -> coordinates), chosen per mask:
//   no mask: query tiles fastest, then heads, then batch: the CTAs resident at once work on one or
//            two heads, whose K and V then stay in L2 instead of every head's streaming through it.
//            Round r gives CTA c tile r·grid + c.
//   causal:  heads fastest, then query tiles from the last (longest) to the first, then batch:
//            a sequence's K/V is read by all its tiles close together in time (L2), and each
//            sequence's short tiles come after its long ones. Lengths fall along the index, so
//            a plain round robin would hand CTA 0 the longest tile of every round (at 16k, about
//            12% more work than the last CTA); rounds alternate direction instead ("snake":
//            CTA c takes r·grid + c on even rounds, r·grid + grid-1-c on odd ones).
#pragma once

#include <cstdint>

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
};

template <bool kLongestFirst>
struct StaticPersistentScheduler {
  int num_m_blocks = 0;
  int num_heads = 0;
  int num_batch = 0;

  ATTNKIT_SM90_HD int num_tiles() const { return num_m_blocks * num_heads * num_batch; }

  // Tile of CTA `cta` in round `round` (>= num_tiles(): this CTA has no more work).
  ATTNKIT_SM90_HD int tile_index(int cta, int round, int grid) const {
    const int base = round * grid;
    if constexpr (kLongestFirst) return base + ((round & 1) ? grid - 1 - cta : cta);
    return base + cta;
  }

  ATTNKIT_SM90_HD WorkTile tile(int idx) const {
    WorkTile t;
    if constexpr (kLongestFirst) {
      t.head = idx % num_heads;
      idx /= num_heads;
      t.m_block = num_m_blocks - 1 - idx % num_m_blocks;
      t.batch = idx / num_m_blocks;
    } else {
      t.m_block = idx % num_m_blocks;
      idx /= num_m_blocks;
      t.head = idx % num_heads;
      t.batch = idx / num_heads;
    }
    return t;
  }
};

}  // namespace attnkit::gpu::sm90

#undef ATTNKIT_SM90_HD
