// The kernel filter's list macros (src/cuda/instantiations/kernel_filter.h) over a list shaped like
// the instantiation lists: entries of dropped head dims or dtypes vanish, nested uses included.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#define ATTNKIT_KERNEL_D64_64 0
#define ATTNKIT_KERNEL_D256_256 1
#define ATTNKIT_KERNEL_fp16 0
#include "cuda/instantiations/kernel_filter.h"

namespace {

#define TEST_POLICIES(X, DQK, DV, DT) X(DQK, DV, DT, plain) X(DQK, DV, DT, full)
#define TEST_DTYPES(X, DQK, DV)                                 \
  ATTNKIT_IF_DIMS(DQK, DV)(                                     \
      ATTNKIT_IF_DTYPE(bf16)(TEST_POLICIES(X, DQK, DV, bf16))   \
      ATTNKIT_IF_DTYPE(fp16)(TEST_POLICIES(X, DQK, DV, fp16)))
#define TEST_LIST(X)                                                    \
  TEST_DTYPES(X, 64, 64)                                                \
  TEST_DTYPES(X, 128, 128)                                              \
  ATTNKIT_IF_DIMS(256, 256)(TEST_DTYPES(X, 256, 256)                    \
                            ATTNKIT_IF_DTYPE(bf16)(X(256, 256, bf16, wide)) \
                            ATTNKIT_IF_DTYPE(fp16)(X(256, 256, fp16, wide)))
#define TEST_ROW(DQK, DV, DT, P) #DQK "_" #DV "_" #DT "_" #P,

TEST(KernelFilter, ListMacrosDropFilteredEntries) {
  // 128/128 is undefined here, so kept; 64/64 and fp16 are dropped.
  const std::vector<std::string> rows = {TEST_LIST(TEST_ROW)};
  const std::vector<std::string> want = {"128_128_bf16_plain", "128_128_bf16_full",
                                         "256_256_bf16_plain", "256_256_bf16_full",
                                         "256_256_bf16_wide"};
  EXPECT_EQ(rows, want);
  EXPECT_EQ(attnkit::detail::kernel_filter_note(), "");  // ATTNKIT_KERNEL_FILTER undefined
}

}  // namespace
