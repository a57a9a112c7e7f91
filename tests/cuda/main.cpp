// GPU test entry point: skips the whole suite, visibly, where no CUDA device is usable.
#include <gtest/gtest.h>

#include <cstdio>

#include "testkit/buffer.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (!attnkit::testkit::cuda_available()) {
    std::printf("SKIPPED: no usable CUDA device (or a CPU-only build); the %d GPU tests did not run.\n",
                testing::UnitTest::GetInstance()->total_test_count());
    return 77;
  }
  std::printf("GPU tests on %s\n", attnkit::testkit::cuda_device_name().c_str());
  return RUN_ALL_TESTS();
}
