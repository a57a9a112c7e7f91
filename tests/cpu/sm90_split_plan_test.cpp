// The Hopper prefill kernel's automatic split-KV count (sm90_split_plan.h) is host arithmetic:
// what it promises (the caller's count honoured, a full grid left unsplit, otherwise one whole
// wave with at least kSm90MinKvTilesPerSplit KV tiles per split) is checked here, where CI runs it.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/attention/sm90/sm90_split_plan.h"

namespace {

using attnkit::gpu::kSm90MaxSplits;
using attnkit::gpu::kSm90MinKvTilesPerSplit;
using attnkit::gpu::sm90_kv_block;
using attnkit::gpu::sm90_kv_tiles_per_query_tile;
using attnkit::gpu::sm90_q_block;
using attnkit::gpu::sm90_split_count;
using attnkit::gpu::Sm90SplitInput;

constexpr int kH100Sms = 132;

Sm90SplitInput input(int64_t work_tiles, int64_t kv_tiles, int sms = kH100Sms, int requested = 0) {
  Sm90SplitInput in;
  in.work_tiles = work_tiles;
  in.kv_tiles = kv_tiles;
  in.sm_count = sms;
  in.requested = requested;
  return in;
}

TEST(Sm90SplitPlan, CallersCountIsHonouredUpToTheCap) {
  // Also where the rule would pick another count: 1 stays 1 on a nearly empty grid, 3 stays 3 on
  // a full one.
  EXPECT_EQ(sm90_split_count(input(8, 256, kH100Sms, 1)), 1);
  EXPECT_EQ(sm90_split_count(input(4096, 64, kH100Sms, 3)), 3);
  EXPECT_EQ(sm90_split_count(input(8, 2, kH100Sms, 16)), 16);
  EXPECT_EQ(sm90_split_count(input(8, 256, kH100Sms, 1000)), kSm90MaxSplits);
}

TEST(Sm90SplitPlan, SplitKvBenchShapes) {
  // GQA 32/8 d128, batch 1 (the bench set splitkv): 128 queries are one 128-row tile per head.
  const int qb = sm90_q_block(128), kb = sm90_kv_block(128);
  ASSERT_EQ(qb, 128);
  for (int64_t sk : {8192, 32768}) {
    const int64_t kv = sm90_kv_tiles_per_query_tile(sk, qb, kb, -1, -1, 0);
    EXPECT_EQ(kv, sk / 128);
    // 32 work tiles: 4 splits fill 128 of 132 SMs in one wave (measured fastest).
    EXPECT_EQ(sm90_split_count(input(1 * 32, kv)), 4) << sk;
    // 512 queries: 128 work tiles already fill the GPU (measured fastest unsplit).
    EXPECT_EQ(sm90_split_count(input(4 * 32, kv)), 1) << sk;
  }
}

TEST(Sm90SplitPlan, FullGridOrNoWorkStaysUnsplit) {
  EXPECT_EQ(sm90_split_count(input(kH100Sms, 1024)), 1);
  EXPECT_EQ(sm90_split_count(input(kH100Sms + 1, 1024)), 1);
  EXPECT_EQ(sm90_split_count(input(1 << 20, 1024)), 1);
  EXPECT_EQ(sm90_split_count(input(0, 1024)), 1);
  EXPECT_EQ(sm90_split_count(input(1, 1024, /*sms=*/1)), 1);
}

TEST(Sm90SplitPlan, FewKeysStayUnsplit) {
  // One query tile on an empty GPU, but each split must get kSm90MinKvTilesPerSplit KV tiles.
  EXPECT_EQ(sm90_split_count(input(1, 0)), 1);
  EXPECT_EQ(sm90_split_count(input(1, 2 * kSm90MinKvTilesPerSplit - 1)), 1);
  EXPECT_EQ(sm90_split_count(input(1, 2 * kSm90MinKvTilesPerSplit)), 2);
  EXPECT_EQ(sm90_split_count(input(1, 1 << 20)), kSm90MaxSplits);  // 132 SMs, capped at 128
}

TEST(Sm90SplitPlan, OneWholeWaveWithEnoughKeysPerSplit) {
  for (int sms : {1, 7, 78, 114, 132})
    for (int64_t work : {1, 2, 3, 5, 16, 31, 32, 33, 64, 65, 100, 131, 132, 1000})
      for (int64_t kv : {0, 1, 3, 4, 7, 8, 9, 64, 100, 257, 4096}) {
        const int s = sm90_split_count(input(work, kv, sms));
        SCOPED_TRACE(testing::Message() << "sms=" << sms << " work=" << work << " kv=" << kv);
        ASSERT_GE(s, 1);
        ASSERT_LE(s, kSm90MaxSplits);
        if (s > 1) {
          EXPECT_LE(work * s, sms);                         // one wave
          EXPECT_LE(s * kSm90MinKvTilesPerSplit, kv);       // enough keys per split
          EXPECT_LT(work, sms);                             // only on a grid with idle SMs
        }
        // The largest such count: one more split would break a bound (or the cap).
        const int64_t more = s + 1;
        EXPECT_TRUE(work >= sms || work * more > sms || more * kSm90MinKvTilesPerSplit > kv ||
                    more > kSm90MaxSplits);
      }
}

TEST(Sm90SplitPlan, KvTilesFollowTheMask) {
  const int qb = 128, kb = 128;
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8192, qb, kb, -1, -1, 0), 64);  // none
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8192, qb, kb, -1, 0, 0), 64);   // causal (bottom-right)
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8193, qb, kb, -1, -1, 0), 65);  // a partial last tile
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(0, qb, kb, -1, -1, 0), 0);
  // Sliding window 100 left: 128 rows see at most 228 keys, two tiles.
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8192, qb, kb, 100, 0, 0), 2);
  // Window with an unbounded side: the keys bound it.
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8192, qb, kb, 100, -1, 0), 64);
  // Chunks of 256: 128 + 2 x 256 keys at most, five tiles; 64-key tiles at d256.
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8192, qb, kb, -1, 0, 256), 5);
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(8192, qb, 64, -1, 0, 256), 10);
  // A window that is wider than the keys.
  EXPECT_EQ(sm90_kv_tiles_per_query_tile(300, qb, kb, 4096, 4096, 0), 3);
}

}  // namespace
