// gdn_decode_step: one more token per sequence against a state pool, equal to running the
// recurrence over the prefix plus that token. The pool has unused slots (their bytes must not
// change) and the indices are a permutation of some of its slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "attnkit/gdn.h"
#include "common/gdn_case.h"
#include "testkit/compare.h"
#include "testkit/naive.h"

namespace attnkit {
namespace {

using testkit::Buffer;

struct DecodeCase {
  DType dtype;
  std::vector<int32_t> prefix;  // tokens each sequence has seen before the decoded one
  int64_t H, HV, K, V;
  bool l2norm;
};

void PrintTo(const DecodeCase& c, std::ostream* os) {
  *os << to_string(c.dtype) << " prefix=[";
  for (size_t i = 0; i < c.prefix.size(); ++i) *os << (i ? "," : "") << c.prefix[i];
  *os << "] H=" << c.H << " HV=" << c.HV << " K=" << c.K << " V=" << c.V
      << (c.l2norm ? " l2norm" : "");
}

class GdnDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(GdnDecode, MatchesRecurrenceOneTokenLonger) {
  const DecodeCase dc = GetParam();
  // Each sequence: its prefix, then the token to decode, in one ragged batch.
  test::GdnCase c;
  c.dtype = dc.dtype;
  for (int32_t l : dc.prefix) c.seqlens.push_back(l + 1);
  c.H = dc.H;
  c.HV = dc.HV;
  c.K = dc.K;
  c.V = dc.V;
  c.l2norm_in_kernel = dc.l2norm;
  c.initial_state = true;
  c.scale = 0.2f;
  const test::GdnData d = test::make_gdn_data(c);
  const int64_t N = c.num_seqs(), HV = c.HV, H = c.H, K = c.K, V = c.V, KV = K * V;
  std::vector<double> o_ref, fin_ref;
  ASSERT_TRUE(testkit::naive_gdn(d.args(d.make_o()), &o_ref, &fin_ref).ok());

  // Pool of P = N + 3 slots; sequence n lives in slot idx[n]; three slots are unused.
  const int64_t P = N + 3;
  std::vector<int32_t> idx;
  for (int32_t s : {5, 0, 3, 2, 7}) idx.push_back(s);
  idx.resize(N);
  Buffer pool(DType::kFloat32, {P, HV, K, V});
  std::mt19937_64 rng(3);
  testkit::fill_normal(pool, rng);

  // The prefix state of each sequence from the chunked forward over just that prefix.
  std::vector<int32_t> cu(1, 0);
  for (int32_t l : c.seqlens) cu.push_back(cu.back() + l);
  const size_t qk_row = H * K * dtype_size(c.dtype), v_row = HV * V * dtype_size(c.dtype);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t L = dc.prefix[n], t0 = cu[n];
    auto* q0 = static_cast<char*>(d.q.data()) + t0 * qk_row;
    auto* k0 = static_cast<char*>(d.k.data()) + t0 * qk_row;
    auto* v0 = static_cast<char*>(d.v.data()) + t0 * v_row;
    Buffer o(c.dtype, {1, L, HV, V});
    GdnChunkArgs a;
    a.q = make_view(q0, c.dtype, {1, L, H, K});
    a.k = make_view(k0, c.dtype, {1, L, H, K});
    a.v = make_view(v0, c.dtype, {1, L, HV, V});
    a.g = make_view(static_cast<float*>(d.g.data()) + t0 * HV, DType::kFloat32, {1, L, HV});
    a.beta = make_view(static_cast<float*>(d.beta.data()) + t0 * HV, DType::kFloat32, {1, L, HV});
    a.initial_state = make_view(static_cast<float*>(d.h0.data()) + n * HV * KV, DType::kFloat32,
                                {1, HV, K, V});
    a.final_state = make_view(static_cast<float*>(pool.data()) + idx[n] * HV * KV,
                              DType::kFloat32, {1, HV, K, V});
    a.o = o.view();
    a.scale = c.scale;
    a.use_qk_l2norm = c.l2norm_in_kernel;
    ASSERT_TRUE(gdn_chunk_forward(a).ok());
  }
  const Buffer pool_before = pool.to(cpu());

  // The decoded tokens: row cu[n+1]-1 of every input.
  Buffer q(c.dtype, {N, H, K}), k(c.dtype, {N, H, K}), v(c.dtype, {N, HV, V});
  Buffer g(DType::kFloat32, {N, HV}), beta(DType::kFloat32, {N, HV}), ind(DType::kInt32, {N});
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = cu[n + 1] - 1;
    std::memcpy(static_cast<char*>(q.data()) + n * qk_row, static_cast<char*>(d.q.data()) + t * qk_row, qk_row);
    std::memcpy(static_cast<char*>(k.data()) + n * qk_row, static_cast<char*>(d.k.data()) + t * qk_row, qk_row);
    std::memcpy(static_cast<char*>(v.data()) + n * v_row, static_cast<char*>(d.v.data()) + t * v_row, v_row);
    std::memcpy(static_cast<float*>(g.data()) + n * HV, static_cast<float*>(d.g.data()) + t * HV, HV * 4);
    std::memcpy(static_cast<float*>(beta.data()) + n * HV, static_cast<float*>(d.beta.data()) + t * HV, HV * 4);
  }
  ind.from_int(idx);
  Buffer o(c.dtype, {N, HV, V});
  o.poison();
  GdnDecodeArgs a{q.view(), k.view(), v.view(), g.view(), beta.view(), pool.view(), ind.view(),
                  o.view(), c.scale, c.l2norm_in_kernel};
  const Status st = gdn_decode_step(a);
  ASSERT_TRUE(st.ok()) << st.message();

  std::vector<float> o_exp, o_got = o.to_float(), s_exp, s_got;
  const auto pool_after = pool.to_float();
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = cu[n + 1] - 1;
    for (int64_t e = 0; e < HV * V; ++e) o_exp.push_back(float(o_ref[t * HV * V + e]));
    for (int64_t e = 0; e < HV * KV; ++e) {
      s_exp.push_back(float(fin_ref[n * HV * KV + e]));
      s_got.push_back(pool_after[idx[n] * HV * KV + e]);
    }
  }
  const auto eo = testkit::compare(o_got, o_exp), es = testkit::compare(s_got, s_exp);
  EXPECT_EQ(eo.nan_count + es.nan_count, 0);
  // bf16 o: its own rounding (~1.7e-3 RMS); everything fp32: fp32 arithmetic only.
  EXPECT_LT(eo.rel_l2, c.dtype == DType::kFloat32 ? 5e-6 : 3e-3) << "o " << eo.str();
  EXPECT_LT(es.rel_l2, 5e-6) << "state " << es.str();

  // Slots no sequence uses are byte for byte unchanged.
  for (int64_t s = 0; s < P; ++s) {
    if (std::find(idx.begin(), idx.end(), s) != idx.end()) continue;
    const size_t bytes = HV * KV * 4;
    EXPECT_EQ(std::memcmp(static_cast<char*>(pool.data()) + s * bytes,
                          static_cast<char*>(pool_before.data()) + s * bytes, bytes),
              0)
        << "slot " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GdnDecode,
    ::testing::Values(DecodeCase{DType::kFloat32, {5, 70, 0}, 1, 2, 32, 32, false},
                      DecodeCase{DType::kFloat32, {64, 1, 130, 9}, 2, 6, 32, 16, true},
                      DecodeCase{DType::kBFloat16, {20, 0, 3, 66, 128}, 2, 4, 128, 128, true}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

}  // namespace
}  // namespace attnkit
