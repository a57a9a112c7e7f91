// append_kv_cache on the GPU against the CPU reference, bit for bit: bf16 / fp16 caches and FP8
// caches with each scale kind, NHD and HND layouts, padding slots, every slot the call does not name
// left untouched; an out-of-range device slot is skipped (and refused with index validation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attnkit/kv_cache.h"
#include "testkit/buffer.h"

namespace attnkit {
namespace {

using testkit::Buffer;

constexpr int64_t kPages = 5, kPage = 16, kHkv = 4, kDk = 128, kDv = 64, kTokens = 37;

struct Sides {
  Buffer k, v, slots, kc, vc, ks, vs;
};

std::vector<int64_t> cache_shape(bool hnd, int64_t d) {
  return hnd ? std::vector<int64_t>{kPages, kHkv, kPage, d} : std::vector<int64_t>{kPages, kPage, kHkv, d};
}

TensorView cache_view(const Buffer& b, bool hnd, int64_t d) {
  if (!hnd) return b.view();
  return make_view(b.data(), b.dtype(), {kPages, kPage, kHkv, d},
                   {kHkv * kPage * d, d, kPage * d, 1}, b.device());
}

Buffer scale_buffer(int kind) {
  return Buffer(DType::kFloat32, kind == 1 ? std::vector<int64_t>{1}
                                 : kind == 2 ? std::vector<int64_t>{kHkv}
                                             : std::vector<int64_t>{kPages, kPage, kHkv});
}

// Host inputs of one case; caches and scales hold old values the call must keep where unnamed.
Sides host_case(DType cache, int scale_kind, bool hnd, const std::vector<int32_t>& slots) {
  std::mt19937_64 rng(17);
  const DType in = cache == DType::kFloat8E4M3 ? DType::kBFloat16 : cache;
  Sides s;
  s.k = Buffer(in, {kTokens, kHkv, kDk});
  s.v = Buffer(in, {kTokens, kHkv, kDv});
  testkit::fill_normal(s.k, rng, 0.f, 4.f);
  testkit::fill_normal(s.v, rng, 0.f, 0.3f);
  s.slots = Buffer(DType::kInt32, {kTokens});
  s.slots.from_int(slots);
  s.kc = Buffer(cache, cache_shape(hnd, kDk));
  s.vc = Buffer(cache, cache_shape(hnd, kDv));
  testkit::fill_uniform(s.kc, rng, -2.f, 2.f);
  testkit::fill_uniform(s.vc, rng, -2.f, 2.f);
  if (scale_kind) {
    s.ks = scale_buffer(scale_kind);
    s.vs = scale_buffer(scale_kind);
    testkit::fill_uniform(s.ks, rng, 0.01f, 0.02f);
    testkit::fill_uniform(s.vs, rng, 0.001f, 0.002f);
  }
  return s;
}

Sides to_device(const Sides& h) {
  Sides d;
  for (auto [from, to] : {std::pair{&h.k, &d.k}, {&h.v, &d.v}, {&h.slots, &d.slots}, {&h.kc, &d.kc},
                          {&h.vc, &d.vc}, {&h.ks, &d.ks}, {&h.vs, &d.vs}})
    if (!from->empty()) *to = from->to(cuda());
  return d;
}

// k_alone: no v / v_cache / v_scale (an MLA latent cache's append).
Status append(const Sides& s, bool hnd, bool validate = false, bool k_alone = false) {
  AppendKvArgs a;
  a.k = s.k.view();
  a.slot_mapping = s.slots.view();
  a.k_cache = cache_view(s.kc, hnd, kDk);
  if (!s.ks.empty()) a.k_scale = s.ks.view();
  if (!k_alone) {
    a.v = s.v.view();
    a.v_cache = cache_view(s.vc, hnd, kDv);
    if (!s.vs.empty()) a.v_scale = s.vs.view();
  }
  ExecOptions opts;
  opts.validate_device_indices = validate;
  return append_kv_cache(a, opts);
}

void expect_same(const Buffer& want, const Buffer& got, const char* what) {
  const std::vector<float> w = want.to_float(), g = got.to_float();
  ASSERT_EQ(w.size(), g.size());
  for (size_t i = 0; i < w.size(); ++i)
    if (!(std::isnan(w[i]) && std::isnan(g[i]))) ASSERT_EQ(w[i], g[i]) << what << " element " << i;
}

std::vector<int32_t> scattered_slots(uint64_t seed) {
  std::vector<int32_t> all(kPages * kPage);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
  std::vector<int32_t> slots(all.begin(), all.begin() + kTokens);
  for (size_t i = 0; i < slots.size(); i += 6) slots[i] = -1;
  return slots;
}

void check_case(DType cache, int scale_kind, bool hnd, bool k_alone = false) {
  SCOPED_TRACE(testing::Message() << to_string(cache) << " scale kind " << scale_kind
                                  << (hnd ? " HND" : " NHD") << (k_alone ? " K alone" : ""));
  const std::vector<int32_t> slots = scattered_slots(3);
  Sides host = host_case(cache, scale_kind, hnd, slots);
  Sides dev = to_device(host);
  ASSERT_TRUE(append(host, hnd, false, k_alone).ok());
  const Status st = append(dev, hnd, false, k_alone);
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();
  expect_same(host.kc, dev.kc, "k_cache");
  expect_same(host.vc, dev.vc, "v_cache");
  if (scale_kind) {
    expect_same(host.ks, dev.ks, "k_scale");
    expect_same(host.vs, dev.vs, "v_scale");
  }
}

TEST(AppendKvCuda, Half16CachesMatchCpu) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (bool hnd : {false, true}) check_case(dt, 0, hnd);
}

TEST(AppendKvCuda, Fp8CachesMatchCpuForEachScaleKind) {
  for (int kind : {1, 2, 3})
    for (bool hnd : {false, true}) check_case(DType::kFloat8E4M3, kind, hnd);
}

// K alone: the V cache (and its scales) stay as they were on both sides.
TEST(AppendKvCuda, KAloneMatchesCpu) {
  check_case(DType::kBFloat16, 0, false, true);
  check_case(DType::kFloat8E4M3, 3, true, true);
}

TEST(AppendKvCuda, OutOfRangeDeviceSlotIsSkippedOrRefused) {
  std::vector<int32_t> slots = scattered_slots(5);
  std::vector<int32_t> padded = slots;
  slots[4] = kPages * kPage + 3;
  slots[9] = -7;
  padded[4] = padded[9] = -1;
  Sides want = host_case(DType::kBFloat16, 0, false, padded);
  ASSERT_TRUE(append(want, false).ok());
  Sides dev = to_device(host_case(DType::kBFloat16, 0, false, slots));
  ASSERT_TRUE(append(dev, false).ok());
  testkit::cuda_synchronize();
  expect_same(want.kc, dev.kc, "k_cache");
  expect_same(want.vc, dev.vc, "v_cache");
  const Status refused = append(dev, false, /*validate=*/true);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("slot_mapping[4]"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace attnkit
