// The decode kernel's L2 policy choice (portable/planner.h): K/V read evict-first where a call may
// read at most 8 x L2 of it, with the default policy beyond, and never without a known L2 size.
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

}  // namespace
}  // namespace attnkit::detail
