// The decode kernel's policy choices (portable/planner.h): K/V read evict-first where a call may
// read at most 8 x L2 of it, with the default policy beyond, and never without a known L2 size;
// the Hopper (TMA) decode kernel where each split reads at least 4096 keys.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/attention/portable/planner.h"

namespace attnkit::detail {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kH100L2 = 50 * kMiB;

// K+V bytes of the decode benchmark's GQA 32/8 d128 bf16 shapes: batch x keys x 8 heads x 512 B.
constexpr int64_t kv_bytes(int64_t batch, int64_t keys) { return batch * keys * 8 * 512; }

TEST(PortableL2Policy, CutAtEightTimesL2) {
  // The shapes the cut was measured on (H100): evict-first faster up to 256 MiB, slower from 512.
  EXPECT_TRUE(decode_l2_stream(kv_bytes(1, 8192), kH100L2));     // 32 MiB
  EXPECT_TRUE(decode_l2_stream(kv_bytes(16, 1024), kH100L2));    // 64 MiB
  EXPECT_TRUE(decode_l2_stream(kv_bytes(1, 32768), kH100L2));    // 128 MiB
  EXPECT_TRUE(decode_l2_stream(kv_bytes(64, 1024), kH100L2));    // 256 MiB
  EXPECT_FALSE(decode_l2_stream(kv_bytes(16, 8192), kH100L2));   // 512 MiB
  EXPECT_FALSE(decode_l2_stream(kv_bytes(64, 32768), kH100L2));  // 8 GiB
  EXPECT_TRUE(decode_l2_stream(8 * kH100L2, kH100L2));
  EXPECT_FALSE(decode_l2_stream(8 * kH100L2 + 1, kH100L2));
  EXPECT_FALSE(decode_l2_stream(0, 0));  // no L2 size known: the default policy
}

TEST(PortableDecodePolicy, TmaFromFourThousandKeysPerSplit) {
  // The decode set's plans (H100): keys and splits.
  EXPECT_TRUE(tma_decode_pays(8192, 2));    // b16 x 8k
  EXPECT_TRUE(tma_decode_pays(32768, 2));   // b16 x 32k
  EXPECT_TRUE(tma_decode_pays(8192, 1));    // b64 x 8k
  EXPECT_FALSE(tma_decode_pays(1024, 1));   // b64 x 1k
  EXPECT_FALSE(tma_decode_pays(1024, 2));   // b16 x 1k
  EXPECT_FALSE(tma_decode_pays(32768, 32)); // b1 x 32k
  EXPECT_FALSE(tma_decode_pays(8192, 32));  // b1 x 8k
  // The cut, rounding the last split up, and no split count read as one.
  EXPECT_TRUE(tma_decode_pays(kTmaDecodeMinKeys, 0));
  EXPECT_FALSE(tma_decode_pays(kTmaDecodeMinKeys - 1, 1));
  EXPECT_TRUE(tma_decode_pays(2 * kTmaDecodeMinKeys - 1, 2));
  EXPECT_FALSE(tma_decode_pays(2 * kTmaDecodeMinKeys - 2, 2));
  EXPECT_TRUE(tma_decode_pays(2147483647, 128));  // no overflow
}

}  // namespace
}  // namespace attnkit::detail
