// Gated DeltaNet decode of several tokens per sequence on the GPU (decode_multi.cu) against the
// CPU reference (itself checked against one-token calls, tests/cpu/gdn_decode_multi_test.cpp):
// outputs, the pool, and step_states after every token, in both state layouts (V-contiguous and
// key-last through transposed views), with explicit and fused gates, update_pool = false (the
// pool bit-identical), padding rows (zero outputs, their step rows untouched), and one token with
// step_states (the multi-token kernel serves it too).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda/gdn_cuda_util.h"

namespace attnkit::gdn_test {
namespace {

constexpr int64_t kD = 128;

struct MultiCase {
  int64_t N, T, H, HV, P;
  DType dt;
  bool fused = false;
  bool key_last = false;     // pool and step_states key-last, passed as transposed views
  bool update_pool = true;
  bool one_token_q = false;  // q [N, H, K] (T = 1) with step_states
};

struct MultiData {
  Buffer q, k, v, g, beta, a, b, A_log, dt_bias, pool, idx;
};

MultiData make(const MultiCase& c, const std::vector<int32_t>& slots, std::mt19937_64& rng) {
  const std::vector<int64_t> tok = c.one_token_q ? std::vector<int64_t>{c.N}
                                                 : std::vector<int64_t>{c.N, c.T};
  auto shape = [&](std::initializer_list<int64_t> rest) {
    std::vector<int64_t> s = tok;
    s.insert(s.end(), rest);
    return s;
  };
  MultiData d;
  d.q = unit_rows(c.dt, shape({c.H, kD}), rng);
  d.k = unit_rows(c.dt, shape({c.H, kD}), rng);
  d.v = Buffer(c.dt, shape({c.HV, kD}));
  testkit::fill_normal(d.v, rng);
  if (c.fused) {
    d.a = Buffer(c.dt, shape({c.HV}));
    d.b = Buffer(c.dt, shape({c.HV}));
    testkit::fill_normal(d.a, rng, 0.f, 2.f);
    testkit::fill_normal(d.b, rng, 0.f, 2.f);
    d.A_log = Buffer(DType::kFloat32, {c.HV});
    d.dt_bias = Buffer(DType::kFloat32, {c.HV});
    testkit::fill_uniform(d.A_log, rng, -3.f, 1.f);
    testkit::fill_normal(d.dt_bias, rng);
  } else {
    d.g = random_gates(shape({c.HV}), rng, -1.f, 0.f);
    d.beta = Buffer(c.dt, shape({c.HV}));
    testkit::fill_uniform(d.beta, rng, 0.05f, 1.f);
  }
  d.pool = Buffer(DType::kFloat32, {c.P, c.HV, kD, kD});
  testkit::fill_normal(d.pool, rng, 0.f, 0.3f);
  d.idx = Buffer(DType::kInt32, {c.N});
  d.idx.from_int(slots);
  return d;
}

MultiData copy_to(const MultiData& h, Device device) {
  auto c = [&](const Buffer& x) { return x.data() ? x.to(device) : Buffer(); };
  return {c(h.q), c(h.k), c(h.v), c(h.g), c(h.beta), c(h.a), c(h.b), c(h.A_log), c(h.dt_bias),
          c(h.pool), c(h.idx)};
}

// A [rows, HV, K, V] (or with a token dim, [N, T, HV, K, V]) view of a buffer holding the states
// in their memory order: [.., K, V], or key-last [.., V, K] seen transposed.
TensorView states(const Buffer& b, bool key_last) {
  TensorView v = b.view();
  if (key_last) std::swap(v.stride[v.ndim - 1], v.stride[v.ndim - 2]);
  return v;
}

GdnDecodeArgs args(const MultiData& d, const MultiCase& c, const Buffer& o, const Buffer& steps) {
  auto view = [](const Buffer& x) { return x.data() ? x.view() : TensorView{}; };
  GdnDecodeArgs a;
  a.q = d.q.view();
  a.k = d.k.view();
  a.v = d.v.view();
  a.g = view(d.g);
  a.beta = view(d.beta);
  a.a = view(d.a);
  a.b = view(d.b);
  a.A_log = view(d.A_log);
  a.dt_bias = view(d.dt_bias);
  a.state_pool = states(d.pool, c.key_last);
  a.state_indices = d.idx.view();
  a.o = o.view();
  a.step_states = states(steps, c.key_last);
  a.update_pool = c.update_pool;
  a.use_qk_l2norm = true;
  return a;
}

void run(const MultiCase& c, const std::vector<int32_t>& slots, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const MultiData h = make(c, slots, rng);
  const std::vector<int64_t> o_shape = c.one_token_q ? std::vector<int64_t>{c.N, c.HV, kD}
                                                     : std::vector<int64_t>{c.N, c.T, c.HV, kD};
  // Step states in memory order: [N, T, HV, K, V] (the key-last ones' last two dims are V, K).
  const std::vector<int64_t> s_shape = {c.N, c.T, c.HV, kD, kD};

  Buffer ref_o(c.dt, o_shape), ref_steps(DType::kFloat32, s_shape);
  ref_steps.poison();
  const MultiData hr = copy_to(h, cpu());  // the reference's own pool
  ExecOptions cpu_opts;
  cpu_opts.backend = Backend::kCPU;
  const Status rs = gdn_decode_step(args(hr, c, ref_o, ref_steps), cpu_opts);
  ASSERT_TRUE(rs.ok()) << rs.message();

  MultiData d = copy_to(h, cuda(0));
  Buffer o = poisoned(c.dt, o_shape), steps = poisoned(DType::kFloat32, s_shape);
  const Status st = gdn_decode_step(args(d, c, o, steps));
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();

  // Rows of padding sequences stay NaN on both sides; compare only the valid rows' elements.
  auto valid_rows = [&](const Buffer& x) {
    const std::vector<float> all = x.to_float();
    const int64_t per = x.numel() / c.N;
    std::vector<float> out;
    for (int64_t n = 0; n < c.N; ++n)
      if (slots[n] >= 0) out.insert(out.end(), all.begin() + n * per, all.begin() + (n + 1) * per);
    return out;
  };
  const auto eo = testkit::compare(o.to_float(), ref_o.to_float());
  std::printf("    %-12s %s\n", "o", eo.str().c_str());
  EXPECT_TRUE(testkit::within(eo, testkit::kGdn)) << eo.str();
  EXPECT_EQ(eo.nan_count, 0) << "o has unwritten elements";
  const auto es = testkit::compare(valid_rows(steps), valid_rows(ref_steps));
  std::printf("    %-12s %s\n", "step_states", es.str().c_str());
  EXPECT_TRUE(testkit::within(es, testkit::kGdn)) << es.str();
  EXPECT_EQ(es.nan_count, 0) << "step_states of a valid sequence unwritten";
  const std::vector<float> sg = steps.to_float();
  const int64_t per = steps.numel() / c.N;
  for (int64_t n = 0; n < c.N; ++n)
    if (slots[n] < 0)
      for (int64_t i = 0; i < per; ++i)
        ASSERT_TRUE(std::isnan(sg[static_cast<size_t>(n * per + i)])) << "padding row " << n;
  if (c.update_pool) {
    expect_close(d.pool, hr.pool, "state pool");
  } else {
    EXPECT_EQ(std::memcmp(d.pool.to(cpu()).data(), h.pool.data(), h.pool.bytes()), 0)
        << "update_pool = false changed the pool";
  }
}

std::vector<int32_t> scattered(int64_t n, int64_t p) {
  std::vector<int32_t> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % p);
  return s;
}

TEST(GdnDecodeMultiCuda, FourTokensBf16) {
  run({32, 4, 4, 8, 40, DType::kBFloat16}, scattered(32, 40), 51);
}
TEST(GdnDecodeMultiCuda, EightTokensFp16FusedGates) {
  MultiCase c{5, 8, 2, 4, 9, DType::kFloat16};
  c.fused = true;
  run(c, {7, 2, 5, 0, 8}, 52);
}
TEST(GdnDecodeMultiCuda, KeyLastStatesAndPoolLeftAlone) {
  MultiCase c{6, 3, 1, 2, 8, DType::kBFloat16};
  c.key_last = true;
  c.update_pool = false;
  run(c, {3, -1, 1, 6, 0, 5}, 53);
}
TEST(GdnDecodeMultiCuda, PaddingRowsAndFusedGatesKeyLast) {
  MultiCase c{4, 2, 2, 4, 6, DType::kBFloat16};
  c.fused = true;
  c.key_last = true;
  run(c, {-1, 4, -1, 1}, 54);
}
TEST(GdnDecodeMultiCuda, OneTokenWithStepStates) {
  MultiCase c{8, 1, 2, 4, 10, DType::kBFloat16};
  c.one_token_q = true;
  run(c, scattered(8, 10), 55);
}

}  // namespace
}  // namespace attnkit::gdn_test
