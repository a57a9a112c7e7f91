// testkit/read_floor.h on the GPU: argument checks, the buffers it reads are left as they were, and
// its time grows with the bytes read (a kernel whose loads were dropped would not); both readers.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "testkit/buffer.h"
#include "testkit/read_floor.h"
#include "testkit/timing.h"

namespace attnkit::testkit {
namespace {

// `bytes` (a multiple of 4) of device memory.
Buffer device_bytes(size_t bytes) {
  return Buffer(DType::kInt32, {static_cast<int64_t>(bytes / 4)}, cuda(0));
}
const char* at(const Buffer& b, size_t offset) { return static_cast<const char*>(b.data()) + offset; }

// The two readers, by 16-byte loads and by bulk copies (sm_90+).
using Reader = Status (*)(const std::vector<ReadSpan>&);
Status loads(const std::vector<ReadSpan>& s) { return read_once(s); }
const std::pair<const char*, Reader> kReaders[] = {{"loads", loads}, {"bulk", read_once_bulk}};

bool bulk_supported() {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
         major >= 9;
}

TEST(TestkitReadFloor, RejectsBadSpans) {
  const Buffer a = device_bytes(4096);
  for (const auto& [name, read] : kReaders) {
    SCOPED_TRACE(name);
    EXPECT_EQ(read({{at(a, 8), 64}}).code(), StatusCode::kInvalidArgument);  // misaligned
    EXPECT_EQ(read({{at(a, 0), 40}}).code(), StatusCode::kInvalidArgument);  // not 16-byte sized
    const std::vector<ReadSpan> five(5, ReadSpan{at(a, 0), 64});
    EXPECT_EQ(read(five).code(), StatusCode::kInvalidArgument);
  }
}

TEST(TestkitReadFloor, LeavesTheBytesAsTheyWere) {
  const size_t n = (size_t{3} << 20) + 48;  // not a multiple of the grid's stride
  std::vector<uint32_t> host(n / 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint32_t>(i * 2654435761u + 7);
  const Buffer a = device_bytes(n), b = device_bytes(n);
  ASSERT_EQ(cudaMemcpy(a.data(), host.data(), n, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.data(), host.data(), n, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(read_once({{a.data(), n}, {b.data(), n - 16}, {a.data(), 0}}).ok());
  if (bulk_supported())
    ASSERT_TRUE(read_once_bulk({{a.data(), n}, {b.data(), n - 16}, {a.data(), 0}}).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint32_t> back(host.size());
  for (const Buffer* d : {&a, &b}) {
    ASSERT_EQ(cudaMemcpy(back.data(), d->data(), n, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, host);
  }
}

TEST(TestkitReadFloor, TimeGrowsWithTheBytes) {
  const Buffer a = device_bytes(size_t{512} << 20);
  ASSERT_EQ(cudaMemset(a.data(), 0x5a, a.bytes()), cudaSuccess);
  for (const auto& [name, read] : kReaders) {
    if (read == read_once_bulk && !bulk_supported()) continue;
    SCOPED_TRACE(name);
    auto time_of = [&, read = read](size_t bytes) {
      std::vector<double> ms;
      const auto call = [&](int) { return read({{a.data(), bytes}}); };
      EXPECT_TRUE(time_calls(call, 2, 9, Flush::kL2, &ms).ok());
      return median_ms(ms);
    };
    const double small = time_of(size_t{32} << 20), large = time_of(a.bytes());
    // 16x the bytes: at least 4x the time, whatever the fixed costs of a call.
    EXPECT_GT(large, 4.0 * small) << small << " ms for 32 MB, " << large << " ms for 512 MB";
  }
}

}  // namespace
}  // namespace attnkit::testkit
