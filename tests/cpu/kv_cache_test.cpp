// append_kv_cache on the CPU reference: the e4m3 codec against its definition, then bf16 / fp16
// caches (NHD and HND) copied exactly and FP8 caches encoded with each scale kind, every slot the
// call does not name left untouched, and bad arguments refused naming the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnkit/kv_cache.h"
#include "cpu/half.h"
#include "testkit/buffer.h"

namespace attnkit {
namespace {

using testkit::Buffer;

TEST(E4m3, EveryFiniteCodeRoundTrips) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const float x = ref::e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(x)) {
      EXPECT_EQ(c & 0x7f, 0x7f);
      continue;
    }
    ++finite;
    EXPECT_EQ(ref::float_to_e4m3(x), c) << x;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(ref::e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(ref::e4m3_to_float(0x01), 0x1p-9f);
}

// Encoding picks the nearest finite value (ties: even code), saturating beyond 448.
TEST(E4m3, EncodesToNearestEvenAndSaturates) {
  std::vector<float> pos;
  for (int c = 0; c < 0x7f; ++c) pos.push_back(ref::e4m3_to_float(static_cast<uint8_t>(c)));
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> mag(-12.f, 10.f);
  std::vector<float> xs;
  for (int i = 0; i < 20000; ++i) xs.push_back(std::exp2(mag(rng)));
  for (size_t i = 0; i + 1 < pos.size(); ++i) xs.push_back(0.5f * (pos[i] + pos[i + 1]));  // ties
  for (float x : xs) {
    int best = 0;
    for (int c = 1; c < 0x7f; ++c) {
      const float dc = std::fabs(pos[c] - x), db = std::fabs(pos[best] - x);
      if (dc < db || (dc == db && c % 2 == 0)) best = c;
    }
    if (x >= 448.f) best = 0x7e;
    EXPECT_EQ(ref::float_to_e4m3(x), best) << x;
    EXPECT_EQ(ref::float_to_e4m3(-x), best | 0x80) << -x;
  }
  EXPECT_EQ(ref::float_to_e4m3(1e9f), 0x7e);
  EXPECT_EQ(ref::float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(ref::float_to_e4m3(NAN) & 0x7f, 0x7f);
}

struct Case {
  int64_t tokens = 7, hkv = 3, dk = 40, dv = 24, pages = 4, page = 5;
  bool hnd = false;
  DType cache = DType::kBFloat16;
  int scale_rank = 0;  // FP8: 1 = [1], 2 = [Hkv], 3 = per token
};

// A cache [pages, page, Hkv, D] as a view, over a buffer laid out NHD or HND.
TensorView cache_view(const Buffer& b, const Case& c, int64_t d) {
  if (!c.hnd) return b.view();
  return make_view(b.data(), b.dtype(), {c.pages, c.page, c.hkv, d},
                   {c.hkv * c.page * d, d, c.page * d, 1});
}

int64_t cache_index(const Case& c, int64_t d, int64_t page, int64_t row, int64_t h, int64_t i) {
  return c.hnd ? ((page * c.hkv + h) * c.page + row) * d + i : ((page * c.page + row) * c.hkv + h) * d + i;
}

struct AppendRun {
  Buffer k, v, slots, kc, vc, ks, vs;
  std::vector<float> kc0, vc0;  // caches before the call
};

AppendRun make_run(const Case& c, std::vector<int32_t> slots, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const DType in = c.cache == DType::kFloat8E4M3 ? DType::kBFloat16 : c.cache;
  AppendRun r;
  r.k = Buffer(in, {c.tokens, c.hkv, c.dk});
  r.v = Buffer(in, {c.tokens, c.hkv, c.dv});
  testkit::fill_normal(r.k, rng, 0.f, 3.f);
  testkit::fill_normal(r.v, rng, 0.f, 0.5f);
  r.slots = Buffer(DType::kInt32, {c.tokens});
  r.slots.from_int(slots);
  const std::vector<int64_t> kshape = c.hnd ? std::vector<int64_t>{c.pages, c.hkv, c.page, c.dk}
                                            : std::vector<int64_t>{c.pages, c.page, c.hkv, c.dk};
  const std::vector<int64_t> vshape = c.hnd ? std::vector<int64_t>{c.pages, c.hkv, c.page, c.dv}
                                            : std::vector<int64_t>{c.pages, c.page, c.hkv, c.dv};
  r.kc = Buffer(c.cache, kshape);
  r.vc = Buffer(c.cache, vshape);
  testkit::fill_uniform(r.kc, rng, -1.f, 1.f);  // old contents, which unnamed slots keep
  testkit::fill_uniform(r.vc, rng, -1.f, 1.f);
  r.kc0 = r.kc.to_float();
  r.vc0 = r.vc.to_float();
  if (c.scale_rank) {
    const std::vector<int64_t> sshape = c.scale_rank == 1   ? std::vector<int64_t>{1}
                                        : c.scale_rank == 2 ? std::vector<int64_t>{c.hkv}
                                                            : std::vector<int64_t>{c.pages, c.page, c.hkv};
    r.ks = Buffer(DType::kFloat32, sshape);
    r.vs = Buffer(DType::kFloat32, sshape);
    testkit::fill_uniform(r.ks, rng, 0.01f, 0.03f);
    testkit::fill_uniform(r.vs, rng, 0.002f, 0.004f);
  }
  return r;
}

AppendKvArgs args_of(const AppendRun& r, const Case& c) {
  AppendKvArgs a;
  a.k = r.k.view();
  a.v = r.v.view();
  a.slot_mapping = r.slots.view();
  a.k_cache = cache_view(r.kc, c, c.dk);
  a.v_cache = cache_view(r.vc, c, c.dv);
  if (c.scale_rank) {
    a.k_scale = r.ks.view();
    a.v_scale = r.vs.view();
  }
  return a;
}

// Checks one side (K or V) of a finished run against the definition.
void expect_side(const Case& c, const Buffer& src, const Buffer& cache, const std::vector<float>& before,
                 const Buffer* scale, int64_t d, const std::vector<int32_t>& slots) {
  const std::vector<float> x = src.to_float(), got = cache.to_float();
  const std::vector<float> sc = scale ? scale->to_float() : std::vector<float>{};
  std::vector<bool> named(static_cast<size_t>(got.size()), false);
  for (int64_t t = 0; t < c.tokens; ++t) {
    if (slots[t] < 0) continue;
    const int64_t page = slots[t] / c.page, row = slots[t] % c.page;
    for (int64_t h = 0; h < c.hkv; ++h) {
      float s = 1.f, amax = 0.f;
      for (int64_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[(t * c.hkv + h) * d + i]));
      if (c.scale_rank == 1) s = sc[0];
      if (c.scale_rank == 2) s = sc[h];
      if (c.scale_rank == 3) {
        s = sc[(page * c.page + row) * c.hkv + h];
        EXPECT_EQ(s, amax / 448.f) << "token " << t << " head " << h;
      }
      for (int64_t i = 0; i < d; ++i) {
        const int64_t at = cache_index(c, d, page, row, h, i);
        named[at] = true;
        const float xi = x[(t * c.hkv + h) * d + i];
        const float want = c.scale_rank ? ref::round_to(DType::kFloat8E4M3, xi / s) : xi;
        ASSERT_EQ(got[at], want) << "token " << t << " head " << h << " dim " << i;
        if (c.scale_rank == 3)  // the full range is used: half an e4m3 ulp relative to the row max
          EXPECT_LE(std::fabs(s * got[at] - xi), amax / 16.f);
      }
    }
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (!named[i]) ASSERT_EQ(std::isnan(got[i]) ? 0.f : got[i], std::isnan(before[i]) ? 0.f : before[i]) << i;
}

void run_and_check(const Case& c, const std::vector<int32_t>& slots) {
  AppendRun r = make_run(c, slots, 11);
  ASSERT_TRUE(append_kv_cache(args_of(r, c)).ok());
  expect_side(c, r.k, r.kc, r.kc0, c.scale_rank ? &r.ks : nullptr, c.dk, slots);
  expect_side(c, r.v, r.vc, r.vc0, c.scale_rank ? &r.vs : nullptr, c.dv, slots);
}

const std::vector<int32_t> kSlots = {3, -1, 17, 0, 19, -1, 9};

TEST(AppendKv, Bf16CacheNhdAndHnd) {
  for (bool hnd : {false, true}) {
    Case c;
    c.hnd = hnd;
    run_and_check(c, kSlots);
  }
}

TEST(AppendKv, Fp16Cache) {
  Case c;
  c.cache = DType::kFloat16;
  run_and_check(c, kSlots);
}

TEST(AppendKv, Fp8CacheEachScaleKind) {
  for (int rank : {1, 2, 3})
    for (bool hnd : {false, true}) {
      Case c;
      c.cache = DType::kFloat8E4M3;
      c.scale_rank = rank;
      c.hnd = hnd;
      SCOPED_TRACE(testing::Message() << "scale kind " << rank << (hnd ? " HND" : " NHD"));
      run_and_check(c, kSlots);
    }
}

// K alone (an MLA latent cache): no v / v_cache; each scale kind on an FP8 cache; V-side
// arguments without the other V tensor are refused.
TEST(AppendKv, KAloneIntoALatentCache) {
  for (int rank : {0, 1, 3}) {
    Case c;
    c.hkv = 1;
    c.dk = 576;
    c.cache = rank ? DType::kFloat8E4M3 : DType::kBFloat16;
    c.scale_rank = rank;
    SCOPED_TRACE(testing::Message() << "scale kind " << rank);
    AppendRun r = make_run(c, kSlots, 13);
    AppendKvArgs a = args_of(r, c);
    a.v = a.v_cache = a.v_scale = {};
    const Status st = append_kv_cache(a);
    ASSERT_TRUE(st.ok()) << st.message();
    expect_side(c, r.k, r.kc, r.kc0, rank ? &r.ks : nullptr, c.dk, kSlots);
    EXPECT_EQ(r.vc.to_float(), r.vc0) << "no V tensor was given, nothing of V written";
  }
  Case c;
  AppendRun r = make_run(c, kSlots, 14);
  AppendKvArgs a = args_of(r, c);
  a.v_cache = {};
  EXPECT_NE(append_kv_cache(a).message().find("v_cache (given v)"), std::string::npos);
  a = args_of(r, c);
  a.v = {};
  EXPECT_NE(append_kv_cache(a).message().find("v (given v_cache)"), std::string::npos);
  Buffer s(DType::kFloat32, {1});
  a = args_of(r, c);
  a.v = a.v_cache = {};
  a.v_scale = s.view();
  EXPECT_NE(append_kv_cache(a).message().find("v_scale is given without v"), std::string::npos);
}

TEST(AppendKv, RefusesBadArguments) {
  Case c;
  auto status_with = [&](auto edit, std::vector<int32_t> slots = kSlots, DType cache = DType::kBFloat16,
                         int scale_rank = 0) {
    Case cc = c;
    cc.cache = cache;
    cc.scale_rank = scale_rank;
    AppendRun r = make_run(cc, std::move(slots), 5);
    AppendKvArgs a = args_of(r, cc);
    edit(a, r);
    return append_kv_cache(a);
  };
  auto nothing = [](AppendKvArgs&, AppendRun&) {};
  auto expect_names = [](const Status& s, const char* name) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  };
  expect_names(status_with(nothing, {3, -1, 20, 0, 19, -1, 9}), "slot_mapping[2] = 20");
  expect_names(status_with(nothing, {3, -1, 17, 0, 19, -2, 9}), "slot_mapping[5] = -2");
  expect_names(status_with(nothing, {3, -1, 17, 3, 19, -1, 9}), "slot 3 to two tokens");
  expect_names(status_with([](AppendKvArgs& a, AppendRun&) { a.k_scale = {}; }, kSlots,
                           DType::kFloat8E4M3, 2), "k_scale is required");
  Buffer s(DType::kFloat32, {1});
  expect_names(status_with([&](AppendKvArgs& a, AppendRun&) { a.v_scale = s.view(); }), "fp8e4m3 caches");
  Buffer wrong(DType::kFloat32, {2});
  expect_names(status_with([&](AppendKvArgs& a, AppendRun&) { a.v_scale = wrong.view(); }, kSlots,
                           DType::kFloat8E4M3, 2), "v_scale has shape");
  Buffer kf(DType::kFloat16, {c.tokens, c.hkv, c.dk});
  expect_names(status_with([&](AppendKvArgs& a, AppendRun&) { a.k = kf.view(); }), "v has dtype");
  Buffer kc_small(DType::kBFloat16, {c.pages, c.page, c.hkv, c.dk + 8});
  expect_names(status_with([&](AppendKvArgs& a, AppendRun&) { a.k_cache = kc_small.view(); }), "k_cache has shape");
  Buffer slots64(DType::kFloat32, {c.tokens});
  expect_names(status_with([&](AppendKvArgs& a, AppendRun&) { a.slot_mapping = slots64.view(); }),
               "slot_mapping has dtype");
}

}  // namespace
}  // namespace attnkit
