// Gated DeltaNet decode with several new tokens per sequence (q [N, T, H, K], speculative
// verification) on the CPU backend, against the one-token step it is defined by:
//   - T tokens in one call equal T one-token calls in a row, bit for bit (outputs and the pool),
//     with explicit and with fused gates;
//   - step_states[n, t] is the pool slot after token t of those one-token calls, also through a
//     key-last (transposed) view; update_pool = false leaves the pool bit-identical;
//   - a padding row (slot -1) gets zero outputs and its step_states rows stay untouched;
//   - shapes that disagree with q's token count are refused, naming the tensor.
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

constexpr int64_t kN = 3, kT = 4, kH = 1, kHV = 2, kK = 16, kV = 8, kP = 5;

struct MultiInputs {
  Buffer q{DType::kBFloat16, {kN, kT, kH, kK}}, k{DType::kBFloat16, {kN, kT, kH, kK}},
      v{DType::kBFloat16, {kN, kT, kHV, kV}}, g{DType::kFloat32, {kN, kT, kHV}},
      beta{DType::kFloat32, {kN, kT, kHV}}, a{DType::kBFloat16, {kN, kT, kHV}},
      b{DType::kBFloat16, {kN, kT, kHV}}, A_log{DType::kFloat32, {kHV}},
      dt_bias{DType::kFloat32, {kHV}}, pool{DType::kFloat32, {kP, kHV, kK, kV}},
      idx{DType::kInt32, {kN}};

  explicit MultiInputs(const std::vector<int32_t>& slots) {
    std::mt19937_64 rng(7);
    for (Buffer* x : {&q, &k, &v, &a, &b, &dt_bias}) testkit::fill_normal(*x, rng);
    testkit::fill_uniform(g, rng, -1.f, 0.f);
    testkit::fill_uniform(beta, rng, 0.05f, 1.f);
    testkit::fill_uniform(A_log, rng, -2.f, 1.f);
    testkit::fill_normal(pool, rng, 0.f, 0.5f);
    idx.from_int(slots);
  }
};

// Token t of every sequence as a one-token view ([N, heads, D] or [N, HV]) of a [N, T, ...] buffer.
TensorView token(const Buffer& x, int64_t t) {
  TensorView v = x.view();
  const int64_t elem = static_cast<int64_t>(dtype_size(v.dtype));
  v.data = static_cast<char*>(v.data) + t * v.stride[1] * elem;
  for (int i = 1; i + 1 < v.ndim; ++i) {
    v.shape[i] = v.shape[i + 1];
    v.stride[i] = v.stride[i + 1];
  }
  --v.ndim;
  return v;
}

GdnDecodeArgs multi_args(const MultiInputs& in, const Buffer& pool, const Buffer& o, bool fused) {
  GdnDecodeArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  if (fused) {
    a.A_log = in.A_log.view();
    a.dt_bias = in.dt_bias.view();
    a.a = in.a.view();
    a.b = in.b.view();
  } else {
    a.g = in.g.view();
    a.beta = in.beta.view();
  }
  a.state_pool = pool.view();
  a.state_indices = in.idx.view();
  a.o = o.view();
  a.use_qk_l2norm = true;
  return a;
}

// The same tokens through T one-token calls: the pool after each token and the outputs.
struct OneByOne {
  std::vector<std::vector<float>> pool_after;  // [t] -> pool
  std::vector<std::vector<float>> o;           // [t] -> [N, HV, V]
};

OneByOne one_by_one(const MultiInputs& in, bool fused) {
  OneByOne r;
  Buffer pool = in.pool.to(cpu());
  for (int64_t t = 0; t < kT; ++t) {
    Buffer o(DType::kBFloat16, {kN, kHV, kV});
    o.poison();
    GdnDecodeArgs a = multi_args(in, pool, o, fused);
    a.q = token(in.q, t);
    a.k = token(in.k, t);
    a.v = token(in.v, t);
    const std::pair<TensorView*, const Buffer*> gates[] = {
        {&a.g, &in.g}, {&a.beta, &in.beta}, {&a.a, &in.a}, {&a.b, &in.b}};
    for (auto [view, buf] : gates)
      if (view->defined()) *view = token(*buf, t);
    const Status st = gdn_decode_step(a);
    EXPECT_TRUE(st.ok()) << st.message();
    r.pool_after.push_back(pool.to_float());
    r.o.push_back(o.to_float());
  }
  return r;
}

// Element (n, t, hv, k, v) of a [N, T, HV, K, V] float vector, and of a pool [P, HV, K, V].
size_t step_at(int64_t n, int64_t t, int64_t hv, int64_t k, int64_t v) {
  return static_cast<size_t>((((n * kT + t) * kHV + hv) * kK + k) * kV + v);
}
size_t pool_at(int64_t s, int64_t hv, int64_t k, int64_t v) {
  return static_cast<size_t>(((s * kHV + hv) * kK + k) * kV + v);
}

void expect_bits(float a, float b, const std::string& what) {
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(float)), 0) << what << ": " << a << " vs " << b;
}

void check_against_one_by_one(bool fused) {
  SCOPED_TRACE(fused ? "fused gating" : "g and beta");
  const std::vector<int32_t> slots = {4, 1, 2};
  MultiInputs in(slots);
  const OneByOne want = one_by_one(in, fused);

  Buffer pool = in.pool.to(cpu()), o(DType::kBFloat16, {kN, kT, kHV, kV});
  Buffer steps(DType::kFloat32, {kN, kT, kHV, kK, kV});
  o.poison();
  steps.poison();
  GdnDecodeArgs a = multi_args(in, pool, o, fused);
  a.step_states = steps.view();
  const Status st = gdn_decode_step(a);
  ASSERT_TRUE(st.ok()) << st.message();

  const std::vector<float> og = o.to_float(), sg = steps.to_float(), pg = pool.to_float();
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t hv = 0; hv < kHV; ++hv) {
        for (int64_t v = 0; v < kV; ++v)
          expect_bits(og[static_cast<size_t>(((n * kT + t) * kHV + hv) * kV + v)],
                      want.o[t][static_cast<size_t>((n * kHV + hv) * kV + v)], "o");
        for (int64_t k = 0; k < kK; ++k)
          for (int64_t v = 0; v < kV; ++v)
            expect_bits(sg[step_at(n, t, hv, k, v)],
                        want.pool_after[t][pool_at(slots[n], hv, k, v)], "step_states");
      }
  const std::vector<float>& last = want.pool_after[kT - 1];
  for (size_t i = 0; i < pg.size(); ++i) expect_bits(pg[i], last[i], "pool");
}

TEST(GdnDecodeMultiToken, EqualsOneTokenCallsInARow) { check_against_one_by_one(false); }
TEST(GdnDecodeMultiToken, EqualsOneTokenCallsInARowWithFusedGates) {
  check_against_one_by_one(true);
}

TEST(GdnDecodeMultiToken, KeyLastStepStatesAndPoolLeftAlone) {
  const std::vector<int32_t> slots = {0, 3, 1};
  MultiInputs in(slots);
  const OneByOne want = one_by_one(in, false);
  Buffer pool = in.pool.to(cpu()), o(DType::kBFloat16, {kN, kT, kHV, kV});
  // Key-last step states [N, T, HV, V, K], passed as the transposed [N, T, HV, K, V] view.
  Buffer steps(DType::kFloat32, {kN, kT, kHV, kV, kK});
  steps.poison();
  GdnDecodeArgs a = multi_args(in, pool, o, false);
  a.step_states = make_view(steps.data(), DType::kFloat32, {kN, kT, kHV, kK, kV},
                            {kT * kHV * kV * kK, kHV * kV * kK, kV * kK, 1, kK}, cpu());
  a.update_pool = false;
  const Status st = gdn_decode_step(a);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(std::memcmp(pool.data(), in.pool.data(), pool.bytes()), 0) << "update_pool = false";
  const std::vector<float> sg = steps.to_float();
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t hv = 0; hv < kHV; ++hv)
        for (int64_t k = 0; k < kK; ++k)
          for (int64_t v = 0; v < kV; ++v)
            expect_bits(sg[static_cast<size_t>((((n * kT + t) * kHV + hv) * kV + v) * kK + k)],
                        want.pool_after[t][pool_at(slots[n], hv, k, v)], "key-last step_states");
}

TEST(GdnDecodeMultiToken, PaddingRowIsSkipped) {
  MultiInputs in({2, -1, 0});
  Buffer pool = in.pool.to(cpu()), o(DType::kBFloat16, {kN, kT, kHV, kV});
  Buffer steps(DType::kFloat32, {kN, kT, kHV, kK, kV});
  o.poison();
  steps.poison();
  GdnDecodeArgs a = multi_args(in, pool, o, false);
  a.step_states = steps.view();
  ASSERT_TRUE(gdn_decode_step(a).ok());
  const std::vector<float> og = o.to_float(), sg = steps.to_float();
  const int64_t per_o = kT * kHV * kV, per_s = kT * kHV * kK * kV;
  for (int64_t i = 0; i < per_o; ++i) EXPECT_EQ(og[static_cast<size_t>(per_o + i)], 0.f) << i;
  for (int64_t i = 0; i < per_s; ++i)
    EXPECT_TRUE(std::isnan(sg[static_cast<size_t>(per_s + i)])) << "padding row's step " << i;
  EXPECT_EQ(count_nan(og), 0);
  EXPECT_EQ(count_nan(sg), per_s) << "the other rows' step states were all written";
  // Slots no sequence uses (1, 3, 4) are untouched.
  const std::vector<float> p0 = in.pool.to_float(), p1 = pool.to_float();
  for (int64_t s : {1, 3, 4})
    for (int64_t i = 0; i < kHV * kK * kV; ++i) {
      const size_t at = static_cast<size_t>(s * kHV * kK * kV + i);
      expect_bits(p1[at], p0[at], "unused slot");
    }
}

TEST(GdnDecodeMultiToken, ShapesMustAgreeWithTheTokenCount) {
  MultiInputs in({0, 1, 2});
  Buffer pool = in.pool.to(cpu()), o(DType::kBFloat16, {kN, kT, kHV, kV});
  auto refused = [&](const GdnDecodeArgs& a, const std::string& what) {
    const Status st = gdn_decode_step(a);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  Buffer v3(DType::kBFloat16, {kN, kHV, kV}), g3(DType::kFloat32, {kN, kHV});
  Buffer o_short(DType::kBFloat16, {kN, kT - 1, kHV, kV});
  Buffer steps_short(DType::kFloat32, {kN, kT - 1, kHV, kK, kV});
  Buffer q5(DType::kBFloat16, {kN, kT, kH, kK, 1});
  GdnDecodeArgs a = multi_args(in, pool, o, false);
  a.v = v3.view();
  refused(a, "v must have 4 dimensions");
  a = multi_args(in, pool, o, false);
  a.g = g3.view();
  refused(a, "g has shape [3, 2], expected [3, 4, 2] ([N, T, HV])");
  a = multi_args(in, pool, o_short, false);
  refused(a, "o has shape [3, 3, 2, 8], expected [3, 4, 2, 8]");
  a = multi_args(in, pool, o, false);
  a.step_states = steps_short.view();
  refused(a, "step_states has shape [3, 3, 2, 16, 8], expected [3, 4, 2, 16, 8]");
  a = multi_args(in, pool, o, false);
  a.q = q5.view();
  refused(a, "q must be [N, H, K] (one token per sequence) or [N, T, H, K]");
  a = multi_args(in, pool, o, false);
  a.step_states = pool.view();  // the pool itself as step states: refused as an aliased output
  refused(a, "step_states");
}

}  // namespace
}  // namespace attnkit::test
