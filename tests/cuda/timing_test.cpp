// testkit/timing.h on the GPU: how many calls it makes, what it returns, that it stops at the
// first failing call, and that the L2 flush lands outside the timed interval.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "testkit/timing.h"

namespace attnkit::testkit {
namespace {

// A device write of `bytes` per call, so that each timed interval holds real GPU work.
struct Scratch {
  void* p = nullptr;
  size_t bytes;
  explicit Scratch(size_t b) : bytes(b) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~Scratch() { cudaFree(p); }
  Status write() {
    if (cudaMemsetAsync(p, 1, bytes, nullptr) != cudaSuccess) return Status::Cuda("cudaMemsetAsync");
    return Status::Ok();
  }
};

TEST(TestkitTiming, WarmupThenRepeatsEachTimed) {
  for (Flush flush : {Flush::kL2, Flush::kNone}) {
    Scratch s(size_t{64} << 20);
    std::vector<int> calls;
    std::vector<double> ms = {-1.0};  // replaced, not appended to
    ASSERT_TRUE(time_calls([&](int i) { calls.push_back(i); return s.write(); }, 3, 7, flush, &ms).ok());
    ASSERT_EQ(calls.size(), 10u);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(calls[i], i);  // call indices run on through the warm-up
    ASSERT_EQ(ms.size(), 7u);
    for (double t : ms) EXPECT_GT(t, 0.0);
  }
}

TEST(TestkitTiming, StopsAtTheFirstFailingCall) {
  int calls = 0;
  std::vector<double> ms;
  const Status st = time_calls(
      [&](int i) { ++calls; return i == 4 ? Status::Invalid("call 4 fails") : Status::Ok(); }, 2, 10,
      Flush::kL2, &ms);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(calls, 5);
}

TEST(TestkitTiming, FlushIsNotTimed) {
  // A call that does nothing on the GPU: its interval must not hold the 256 MB memset before it
  // (about 0.1 ms at H100 bandwidth, far above an empty interval).
  std::vector<double> ms;
  ASSERT_TRUE(time_calls([](int) { return Status::Ok(); }, 1, 9, Flush::kL2, &ms).ok());
  EXPECT_LT(median_ms(ms), 0.05);
}

TEST(TestkitTiming, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median_ms({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median_ms({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_TRUE(std::isnan(median_ms({})));
}

}  // namespace
}  // namespace attnkit::testkit
