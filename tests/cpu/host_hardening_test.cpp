// Arguments no caller should pass, each refused with a Status naming the argument and nothing
// written (the defect classes a fuzzing campaign over the CPU build found): more dims than a
// TensorView holds, sizes that int arithmetic would wrap, element counts and spans past int64,
// device types other than CPU and CUDA, and index tensors that claim billions of entries.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/gdn.h"
#include "attnkit/kv_cache.h"
#include "cpu/cpu_attention_util.h"

namespace attnkit::test {
namespace {

void expect_invalid(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message();
}

AttnData small_case() {
  AttnCase c = AttnCase::uniform(2, 4, 8);
  c.hq = 4;
  c.hkv = 2;
  return make_attn_data(c);
}

TEST(HostHardening, MoreDimsThanATensorViewHolds) {
  AttnData d = small_case();
  AttentionArgs a = d.args();
  a.k.ndim = kMaxDims + 1;
  expect_invalid(attention_forward(a, cpu_opts()), "k has 7 dimensions");
  a = d.args();
  a.q.ndim = -3;
  expect_invalid(attention_forward(a, cpu_opts()), "q is required");  // ndim <= 0: not given
}

TEST(HostHardening, SizesThatIntWouldWrapAreRefused) {
  AttnData d = small_case();
  AttentionArgs a = d.args();
  // batch 2^32 + 2 would read as 2 after a cast to int; stride 0 keeps every element in bounds
  a.q.shape[0] = (int64_t{1} << 32) + 2;
  a.q.stride[0] = 0;
  expect_invalid(attention_forward(a, cpu_opts()), "q has size 4294967298 in dimension 0");
  a = d.args();
  a.k.shape[2] = (int64_t{1} << 31) + 2;  // heads
  a.k.stride[2] = 0;
  expect_invalid(attention_forward(a, cpu_opts()), "sizes must stay below 2^31");
}

TEST(HostHardening, ElementCountsAndSpansPastInt64AreRefused) {
  AttnData d = small_case();
  AttentionArgs a = d.args();
  for (int i = 0; i < 3; ++i) {  // (2^31 - 1)^3 elements, every stride 0
    a.v.shape[i] = (int64_t{1} << 31) - 1;
    a.v.stride[i] = 0;
  }
  expect_invalid(attention_forward(a, cpu_opts()), "v has more than 2^62 elements");
  a = d.args();
  a.o.stride[0] = int64_t{1} << 62;  // batch 2: offset 2^62 past the start
  expect_invalid(attention_forward(a, cpu_opts()), "o spans more than 2^62 elements");
}

TEST(HostHardening, UnknownDeviceTypesAreNotReadAsHostMemory) {
  AttnData d = small_case();
  AttentionArgs a = d.args();
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o, &a.lse}) t->device.type = static_cast<DeviceType>(7);
  expect_invalid(attention_forward(a, cpu_opts()), "unknown device type (7)");

  AppendKvArgs ap;
  testkit::Buffer k(DType::kBFloat16, {3, 2, 64}), cache(DType::kBFloat16, {2, 4, 2, 64});
  testkit::Buffer slots(DType::kInt32, {3});
  slots.from_int({0, 1, 2});
  ap.k = ap.v = k.view();
  ap.k_cache = ap.v_cache = cache.view();
  ap.slot_mapping = slots.view();
  for (TensorView* t : {&ap.k, &ap.v, &ap.k_cache, &ap.v_cache, &ap.slot_mapping})
    t->device.type = static_cast<DeviceType>(9);
  expect_invalid(append_kv_cache(ap, cpu_opts()), "unknown device type (9)");
}

TEST(HostHardening, IndexTensorsClaimingBillionsOfEntriesAreRefused) {
  AttnCase c = AttnCase::uniform(2, 4, 8);
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {1, 3};
  AttnData d = make_attn_data(c);
  AttentionArgs a = d.args();
  // cu_seqlens of 2^30 + 1 entries each (stride 0: every entry the same 0): B = 2^30 empty
  // sequences, consistent everywhere, and more entries than the library reads into host memory.
  for (TensorView* t : {&a.cu_seqlens_q, &a.cu_seqlens_k}) {
    t->shape[0] = (int64_t{1} << 30) + 1;
    t->stride[0] = 0;
  }
  expect_invalid(attention_forward(a, cpu_opts()), "more than the 2^28 an index tensor may have");
}

// gdn_decode_step's distinct-slot check costs O(N log N) in the sequences, nothing in the pool's
// slots: a pool claiming 2^31 - 1 slots with one sequence used to make it allocate and fill
// 16 GiB (found by fuzz/gdn_fuzz.cpp's author with a broadcast pool, fuzz/crashes/gdn/; a pool
// whose slots share memory is now refused, GdnAliasing below). Every tensor lives in one
// allocation with the pool last, so the pool's slots (16 floats apart; only the ones named are
// touched) reach past the allocation but over no other argument.
TEST(HostHardening, GdnDecodeSlotCheckDoesNotScaleWithThePool) {
  std::vector<float> mem(64, 0.5f);  // g, beta at 8..11; indices at 12..13; the pool from 16
  auto* tok = reinterpret_cast<uint16_t*>(mem.data());  // floats 0..7: 16 bf16 values
  for (int i = 0; i < 16; ++i) tok[i] = 0x3f80;          // q, k, v (first 4 values), o (8..11)
  auto* idx = reinterpret_cast<int32_t*>(mem.data() + 12);
  idx[0] = 0;
  GdnDecodeArgs a;
  a.q = make_view(tok, DType::kBFloat16, {1, 1, 4});
  a.k = make_view(tok, DType::kBFloat16, {1, 1, 4});
  a.v = make_view(tok, DType::kBFloat16, {1, 1, 4});
  a.o = make_view(tok + 8, DType::kBFloat16, {1, 1, 4});
  a.g = make_view(mem.data() + 8, DType::kFloat32, {1, 1});
  a.beta = make_view(mem.data() + 9, DType::kFloat32, {1, 1});
  a.state_pool = make_view(mem.data() + 16, DType::kFloat32, {(int64_t{1} << 31) - 1, 1, 4, 4});
  a.state_indices = make_view(idx, DType::kInt32, {1});
  ExecOptions opts = cpu_opts();
  opts.cpu_threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = gdn_decode_step(a, opts);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_LT(seconds, 1.0);
  // Two sequences on one slot are still refused.
  idx[0] = idx[1] = 3;
  a.q = make_view(tok, DType::kBFloat16, {2, 1, 2});
  a.k = make_view(tok, DType::kBFloat16, {2, 1, 2});
  a.v = make_view(tok, DType::kBFloat16, {2, 1, 2});
  a.o = make_view(tok + 8, DType::kBFloat16, {2, 1, 2});
  a.g = make_view(mem.data() + 8, DType::kFloat32, {2, 1});
  a.beta = make_view(mem.data() + 10, DType::kFloat32, {2, 1});
  a.state_pool = make_view(mem.data() + 16, DType::kFloat32, {(int64_t{1} << 31) - 1, 1, 2, 2});
  a.state_indices = make_view(idx, DType::kInt32, {2});
  expect_invalid(gdn_decode_step(a, opts), "state_indices[1] = 3 repeats state_indices[0]");
}

}  // namespace
}  // namespace attnkit::test
