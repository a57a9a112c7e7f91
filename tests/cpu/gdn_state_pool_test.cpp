// Gated DeltaNet forward with its states in pools (GdnChunkArgs::state_indices, as engines keep
// them) on the CPU backend, against the same forward on per-sequence states gathered from and
// scattered back to the pool by hand, bit for bit: in place (final_state = initial_state) and
// with two pools of different sizes, a padding sequence (-1: zeros in, nothing out), the chunked
// forward and the recurrent reference; bad indices and pools are refused, naming them.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnkit/gdn.h"
#include "common/gdn_case.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

GdnCase pool_case() {
  GdnCase c;
  c.seqlens = {70, 5, 130, 64};
  c.H = 1;
  c.HV = 2;
  c.K = 32;
  c.V = 16;
  c.l2norm_in_kernel = true;
  c.seed = 21;
  return c;
}

int64_t state_size(const GdnCase& c) { return c.HV * c.K * c.V; }

Buffer random_pool(const GdnCase& c, int64_t rows, uint64_t seed) {
  Buffer p(DType::kFloat32, {rows, c.HV, c.K, c.V});
  std::mt19937_64 rng(seed);
  testkit::fill_normal(p, rng, 0.f, 0.5f);
  return p;
}

// Per-sequence states [N, ...] gathered from pool rows `slots` (zeros for -1).
Buffer gather(const GdnCase& c, const Buffer& pool, const std::vector<int32_t>& slots) {
  const int64_t n = static_cast<int64_t>(slots.size()), sz = state_size(c);
  Buffer out(DType::kFloat32, {n, c.HV, c.K, c.V});
  std::vector<float> src = pool.to_float(), dst(static_cast<size_t>(n * sz), 0.f);
  for (int64_t i = 0; i < n; ++i)
    if (slots[i] >= 0)
      std::copy(src.begin() + slots[i] * sz, src.begin() + (slots[i] + 1) * sz, dst.begin() + i * sz);
  out.from_float(dst);
  return out;
}

void expect_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

using Forward = Status (*)(const GdnChunkArgs&, const ExecOptions&);

void check_pools(Forward forward, bool in_place) {
  SCOPED_TRACE(in_place ? "one pool, in place" : "two pools");
  const GdnCase c = pool_case();
  const GdnData d = make_gdn_data(c);
  const std::vector<int32_t> slots = {5, -1, 0, 3};
  const Buffer init = random_pool(c, 6, 3);
  Buffer fin = in_place ? init.to(cpu()) : random_pool(c, 9, 4);
  const std::vector<float> fin0 = fin.to_float();

  // The reference: gathered states, the plain forward, then scattered by hand.
  Buffer h0 = gather(c, init, slots), ht = d.make_state(), o_ref = d.make_o();
  GdnChunkArgs r = d.args(o_ref, &ht);
  r.initial_state = h0.view();
  ASSERT_TRUE(forward(r, {}).ok());
  std::vector<float> want = fin0;
  const std::vector<float> htv = ht.to_float();
  const int64_t sz = state_size(c);
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] >= 0)
      std::copy(htv.begin() + i * sz, htv.begin() + (i + 1) * sz, want.begin() + slots[i] * sz);

  Buffer idx(DType::kInt32, {4});
  idx.from_int(slots);
  Buffer o = d.make_o();
  o.poison();
  GdnChunkArgs a = d.args(o);
  a.initial_state = in_place ? fin.view() : init.view();
  a.final_state = fin.view();
  a.state_indices = idx.view();
  const Status st = forward(a, {});
  ASSERT_TRUE(st.ok()) << st.message();
  expect_bits(o.to_float(), o_ref.to_float(), "o");
  expect_bits(fin.to_float(), want, "final pool (rows no sequence uses unchanged)");
}

TEST(GdnStatePool, ChunkForwardInPlace) { check_pools(&gdn_chunk_forward, true); }
TEST(GdnStatePool, ChunkForwardTwoPools) { check_pools(&gdn_chunk_forward, false); }
TEST(GdnStatePool, RecurrentForwardInPlace) { check_pools(&gdn_recurrent_forward, true); }

TEST(GdnStatePool, BadIndicesAndPoolsAreRefused) {
  const GdnCase c = pool_case();
  const GdnData d = make_gdn_data(c);
  Buffer pool = random_pool(c, 6, 5), o = d.make_o();
  auto refused = [&](const std::vector<int32_t>& slots, const std::string& what,
                     const TensorView* init, const TensorView* fin, DType dt = DType::kInt32) {
    Buffer idx(dt, {static_cast<int64_t>(slots.size())});
    if (dt == DType::kInt32) idx.from_int(slots);
    GdnChunkArgs a = d.args(o);
    if (init) a.initial_state = *init;
    if (fin) a.final_state = *fin;
    a.state_indices = idx.view();
    const Status st = gdn_chunk_forward(a);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  const TensorView pv = pool.view();
  refused({5, -1, 0, 5}, "state_indices[3] = 5 repeats state_indices[0]", &pv, &pv);
  refused({5, -1, 6, 1}, "state_indices[2] = 6 is outside [0, 6) (initial_state and final_state",
          &pv, &pv);
  refused({5, -2, 0, 1}, "is not -1 (padding)", &pv, nullptr);
  refused({0, 1, 2, 3}, "give at least one of them", nullptr, nullptr);
  refused({0, 1, 2}, "state_indices has shape [3], expected [4]", &pv, &pv);
  refused({0, 1, 2, 3}, "state_indices has dtype fp32", &pv, &pv, DType::kFloat32);
  Buffer narrow(DType::kFloat32, {6, c.HV + 1, c.K, c.V});
  const TensorView nv = narrow.view();
  refused({0, 1, 2, 3}, "final_state has shape", &pv, &nv);
  Buffer small = random_pool(c, 2, 6);
  const TensorView sv = small.view();
  refused({0, 1, 2, -1}, "state_indices[2] = 2 is outside [0, 2)", &pv, &sv);
}

}  // namespace
}  // namespace attnkit::test
