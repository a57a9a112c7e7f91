// The Hopper prefill kernel's tile schedulers are plain host/device arithmetic: their contract
// (every work tile handed out exactly once, over the grid each one asks for, in the order its
// comment promises) is checked here, where CI runs it, by replaying the kernel's loop.
#include <gtest/gtest.h>

#include <iterator>
#include <vector>

#include "cuda/attention/sm90/sm90_tile_scheduler.h"

namespace {

using attnkit::gpu::sm90::causal_pairs_fill;
using attnkit::gpu::sm90::LongestFirstScheduler;
using attnkit::gpu::sm90::PersistentCausalPairScheduler;
using attnkit::gpu::sm90::PersistentLongestFirstScheduler;
using attnkit::gpu::sm90::PersistentScheduler;
using attnkit::gpu::sm90::VarlenScheduler;
using attnkit::gpu::sm90::WithVarlen;
using attnkit::gpu::sm90::WorkTile;

struct Shape {
  int m_blocks, heads, batch;
};
constexpr Shape kShapes[] = {{1, 1, 1}, {4, 16, 4}, {128, 16, 1}, {3, 40, 2}, {9, 7, 5}, {32, 1, 33}};
constexpr int kSms[] = {1, 7, 132};

// Replays the kernel's loop (CTA c takes tile_index(c, round, grid) until it passes the count)
// and returns, per (batch, head, m_block), how often it was handed out; `order` gets the tiles
// of round 0 in CTA order.
template <class Sched>
std::vector<int> replay(const Sched& s, int sms, std::vector<WorkTile>* order) {
  const int grid = s.grid(s.num_tiles(), sms);
  EXPECT_GE(grid, 1);
  EXPECT_LE(grid, s.num_tiles());
  std::vector<int> seen(static_cast<size_t>(s.num_tiles()), 0);
  for (int cta = 0; cta < grid; ++cta)
    for (int round = 0;; ++round) {
      const int t = s.tile_index(cta, round, grid);
      if (t >= s.num_tiles()) break;
      EXPECT_GE(t, 0);
      const WorkTile w = s.tile(t);
      EXPECT_TRUE(w.m_block >= 0 && w.m_block < s.num_m_blocks && w.head >= 0 &&
                  w.head < s.num_heads && w.batch >= 0 && w.batch < s.num_batch);
      ++seen[(static_cast<size_t>(w.batch) * s.num_heads + w.head) * s.num_m_blocks + w.m_block];
      if (round == 0 && order) order->push_back(w);
    }
  return seen;
}

template <class Sched>
void expect_each_tile_once(int* checked) {
  for (const Shape& sh : kShapes)
    for (int sms : kSms) {
      Sched s;
      s.num_m_blocks = sh.m_blocks;
      s.num_heads = sh.heads;
      s.num_batch = sh.batch;
      const std::vector<int> seen = replay(s, sms, nullptr);
      for (size_t i = 0; i < seen.size(); ++i)
        ASSERT_EQ(seen[i], 1) << "tile " << i << " of " << sh.m_blocks << "x" << sh.heads << "x"
                              << sh.batch << " with " << sms << " SMs";
      ++*checked;
    }
}

TEST(Sm90TileScheduler, EveryTileExactlyOnce) {
  int checked = 0;
  expect_each_tile_once<PersistentScheduler>(&checked);
  expect_each_tile_once<LongestFirstScheduler>(&checked);
  expect_each_tile_once<PersistentLongestFirstScheduler>(&checked);
  expect_each_tile_once<VarlenScheduler>(&checked);
  EXPECT_EQ(checked, 4 * static_cast<int>(std::size(kShapes)) * static_cast<int>(std::size(kSms)));
}

TEST(Sm90TileScheduler, GridSizes) {
  EXPECT_EQ(PersistentScheduler::grid(1000, 132), 132);
  EXPECT_EQ(PersistentScheduler::grid(5, 132), 5);
  EXPECT_EQ(PersistentLongestFirstScheduler::grid(1000, 132), 132);
  EXPECT_EQ(LongestFirstScheduler::grid(1000, 132), 1000);  // one CTA per tile
  EXPECT_EQ(PersistentCausalPairScheduler::grid(1000, 132), 132);
  EXPECT_EQ(PersistentCausalPairScheduler::grid(10, 132), 5);  // one CTA per pair
}

// Pairs: every query tile once; with an odd count the middle tile's partner slot is m = M (past
// the end, skipped by the kernel), once per (batch, head) and never otherwise; a CTA's rounds 2r
// and 2r + 1 are one (batch, head)'s tiles M-1-j and j, so with one KV tile per query tile
// (causal, square tiles) every pair sees M + 1 KV tiles (the middle one alone (M + 1) / 2).
TEST(Sm90TileScheduler, CausalPairsAreBalancedAndCoverEachTileOnce) {
  int checked = 0;
  for (const Shape& sh : kShapes)
    for (int sms : kSms) {
      PersistentCausalPairScheduler s;
      s.num_m_blocks = sh.m_blocks;
      s.num_heads = sh.heads;
      s.num_batch = sh.batch;
      const int m = sh.m_blocks;
      const int grid = s.grid(s.num_tiles(), sms);
      ASSERT_GE(grid, 1);
      std::vector<int> seen(static_cast<size_t>(m) * sh.heads * sh.batch, 0);
      int skipped = 0;
      for (int cta = 0; cta < grid; ++cta)
        for (int round = 0;; ++round) {
          const int t = s.tile_index(cta, round, grid);
          if (t >= s.num_tiles()) {
            EXPECT_EQ(round % 2, 0) << "a pair was cut in two";
            break;
          }
          const WorkTile w = s.tile(t);
          ASSERT_TRUE(w.m_block >= 0 && w.m_block <= m && w.head >= 0 && w.head < sh.heads &&
                      w.batch >= 0 && w.batch < sh.batch);
          if (round % 2 == 1) {
            const WorkTile first = s.tile(s.tile_index(cta, round - 1, grid));
            EXPECT_TRUE(first.head == w.head && first.batch == w.batch);
            if (w.m_block == m) {
              EXPECT_EQ(2 * first.m_block + 1, m);  // the middle tile, alone
            } else {
              EXPECT_EQ(first.m_block + w.m_block, m - 1);  // (m-1-j) + j: M + 1 KV tiles
              EXPECT_LT(w.m_block, first.m_block);  // the longer one first
            }
          }
          if (w.m_block == m) {
            ++skipped;
            continue;
          }
          ++seen[(static_cast<size_t>(w.batch) * sh.heads + w.head) * m + w.m_block];
        }
      for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << i;
      EXPECT_EQ(skipped, m % 2 == 1 ? sh.heads * sh.batch : 0);
      ++checked;
    }
  EXPECT_EQ(checked, static_cast<int>(std::size(kShapes)) * static_cast<int>(std::size(kSms)));
}

// Causal tiles handed to CTAs in launch order must start with the longest (the last query tile),
// so the short ones fill the gaps at the end.
TEST(Sm90TileScheduler, LongestFirstStartsWithTheLastQueryTile) {
  LongestFirstScheduler s;
  s.num_m_blocks = 8;
  s.num_heads = 4;
  s.num_batch = 2;
  std::vector<WorkTile> order;
  replay(s, 132, &order);
  ASSERT_EQ(order.size(), 64u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i].m_block, 7 - static_cast<int>(i % 8)) << i;

  PersistentLongestFirstScheduler p;
  p.num_m_blocks = 8;
  p.num_heads = 4;
  p.num_batch = 2;
  order.clear();
  replay(p, 16, &order);  // round 0: query tiles 7, 6, 5, 4, each for the 4 heads
  ASSERT_EQ(order.size(), 16u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i].m_block, 7 - static_cast<int>(i / 4)) << i;
}

}  // namespace

namespace {

// Varlen: query tiles from the last to the first are the slowest index, so round 0 hands out the
// deepest tiles (which only the longest sequences have) for every batch and head first; rounds
// alternate direction.
TEST(Sm90TileScheduler, VarlenGoesDeepestTileFirstOverAllSequences) {
  VarlenScheduler s;
  s.num_m_blocks = 5;
  s.num_heads = 3;
  s.num_batch = 4;
  std::vector<WorkTile> order;
  const std::vector<int> seen = replay(s, 24, &order);  // round 0: 24 of the 60 tiles
  for (int n : seen) EXPECT_EQ(n, 1);
  ASSERT_EQ(order.size(), 24u);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i].m_block, 4 - static_cast<int>(i / 12)) << i;
    EXPECT_EQ(order[i].batch, static_cast<int>(i / 3 % 4)) << i;
    EXPECT_EQ(order[i].head, static_cast<int>(i % 3)) << i;
  }
  EXPECT_EQ(VarlenScheduler::grid(1000, 132), 132);
  EXPECT_EQ(VarlenScheduler::grid(7, 132), 7);
}

// The kernel's scheduler picks the varlen order at run time; both modes hand every tile out once.
TEST(Sm90TileScheduler, WithVarlenSwitchesAtRunTime) {
  for (int use : {0, 1}) {
    WithVarlen<LongestFirstScheduler> s;
    s.use_varlen = use;
    s.fixed.num_m_blocks = 6;
    s.fixed.num_heads = 4;
    s.fixed.num_batch = 2;
    s.varlen.num_m_blocks = 9;  // the longest sequence, not Sq
    s.varlen.num_heads = 4;
    s.varlen.num_batch = 2;
    EXPECT_EQ(s.num_tiles(), use ? 72 : 48);
    EXPECT_EQ(s.grid(s.num_tiles(), 132), use ? 72 : 48);
    EXPECT_EQ(s.grid(s.num_tiles(), 16), use ? 16 : 48);  // varlen is persistent
    std::vector<int> seen(static_cast<size_t>(s.num_tiles()), 0);
    const int grid = s.grid(s.num_tiles(), 16);
    const int mb = use ? 9 : 6;
    for (int cta = 0; cta < grid; ++cta)
      for (int round = 0;; ++round) {
        const int t = s.tile_index(cta, round, grid);
        if (t >= s.num_tiles()) break;
        const WorkTile w = s.tile(t);
        ASSERT_TRUE(w.m_block >= 0 && w.m_block < mb && w.head >= 0 && w.head < 4 && w.batch >= 0 &&
                    w.batch < 2);
        ++seen[(static_cast<size_t>(w.batch) * 4 + w.head) * mb + w.m_block];
      }
    for (int n : seen) EXPECT_EQ(n, 1) << "use_varlen=" << use;
  }
}

// Split-KV multiplies the work tiles: every (tile, split) is handed out once, the split is the
// fastest factor (consecutive indices are the splits of one query tile), and one split is the
// scheduler without splits.
TEST(Sm90TileScheduler, SplitsAreTheFastestFactor) {
  for (int use : {0, 1})
    for (int splits : {1, 3, 16}) {
      WithVarlen<PersistentLongestFirstScheduler> s;
      s.use_varlen = use;
      s.num_splits = attnkit::gpu::FastDiv(splits);
      s.fixed.num_m_blocks = 5;
      s.fixed.num_heads = 3;
      s.fixed.num_batch = 2;
      s.varlen.num_m_blocks = 7;
      s.varlen.num_heads = 3;
      s.varlen.num_batch = 2;
      const int mb = use ? 7 : 5;
      ASSERT_EQ(s.num_tiles(), mb * 3 * 2 * splits);
      std::vector<int> seen(static_cast<size_t>(s.num_tiles()), 0);
      const int grid = s.grid(s.num_tiles(), 16);
      for (int cta = 0; cta < grid; ++cta)
        for (int round = 0;; ++round) {
          const int t = s.tile_index(cta, round, grid);
          if (t >= s.num_tiles()) break;
          const WorkTile w = s.tile(t);
          ASSERT_TRUE(w.m_block >= 0 && w.m_block < mb && w.head >= 0 && w.head < 3 &&
                      w.batch >= 0 && w.batch < 2 && w.split >= 0 && w.split < splits);
          ++seen[((static_cast<size_t>(w.batch) * 3 + w.head) * mb + w.m_block) * splits + w.split];
        }
      for (int n : seen) EXPECT_EQ(n, 1) << "use_varlen=" << use << " splits=" << splits;
      WithVarlen<PersistentLongestFirstScheduler> one = s;
      one.num_splits = attnkit::gpu::FastDiv(1);
      for (int t = 0; t < s.num_tiles(); ++t) {
        const WorkTile w = s.tile(t), u = one.tile(t / splits);
        EXPECT_EQ(w.split, t % splits);
        EXPECT_TRUE(w.m_block == u.m_block && w.head == u.head && w.batch == u.batch) << t;
      }
    }
}

// The pair grid runs one CTA per pair of 128-row query tiles: the dispatcher takes it only when
// those pairs are at least one per SM.
TEST(Sm90TileScheduler, CausalPairsOnlyWhenThePairsFillTheSms) {
  EXPECT_FALSE(causal_pairs_fill(512, 32, 132));      // 4 tiles, 2 pairs x 32 heads = 64
  EXPECT_TRUE(causal_pairs_fill(512, 66, 132));       // 2 x 66 = 132
  EXPECT_FALSE(causal_pairs_fill(384, 43, 132));      // 3 tiles (the middle one alone): 2 x 43
  EXPECT_TRUE(causal_pairs_fill(300, 6 * 16, 132));   // the GPU test's case: 2 x 96
  EXPECT_TRUE(causal_pairs_fill(512, 32 * 32, 132));  // FA3 shapes: 16k tokens, many heads
  EXPECT_TRUE(causal_pairs_fill(129, 1, 1));          // 2 tiles are 1 pair
  EXPECT_FALSE(causal_pairs_fill(129, 1, 2));
}

}  // namespace
