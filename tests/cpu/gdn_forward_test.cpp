// The whole Gated DeltaNet forward: chunked (gdn_chunk_forward) and token-by-token
// (gdn_recurrent_forward) against the fp64 naive recurrence, over the shapes that break chunking:
// lengths off the 64 grid, shorter than a chunk, exactly 64 and 128, grouped value heads, ragged
// batches with an empty sequence, initial and final states, in-kernel L2 norm, custom scale.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "attnkit/gdn.h"
#include "common/gdn_case.h"
#include "testkit/compare.h"
#include "testkit/naive.h"

namespace attnkit {
namespace {

using testkit::Buffer;
using test::GdnCase;

// o is stored in the input dtype: with 16-bit outputs the comparison is bounded by that rounding
// (at most 2^-8 relative per element for bf16, whose RMS is ~1.7e-3 here; 2^-11 for fp16); with
// fp32 outputs, and always for the fp32 final state, only fp32 arithmetic remains (~1e-6 seen).
double o_tolerance(DType dt) {
  switch (dt) {
    case DType::kBFloat16: return 3e-3;
    case DType::kFloat16: return 5e-4;
    default: return 5e-6;
  }
}
constexpr double kStateTol = 5e-6;

using ForwardFn = Status (*)(const GdnChunkArgs&, const ExecOptions&);

// Runs `fn` on poisoned outputs and checks it against the naive recurrence.
void check_against_naive(const GdnCase& c, ForwardFn fn, const char* name) {
  SCOPED_TRACE(std::string(name) + ": " + c.str());
  const test::GdnData d = test::make_gdn_data(c);
  Buffer o = d.make_o(), fin = d.make_state();
  o.poison();
  fin.poison();
  const Status st = fn(d.args(o, &fin), ExecOptions{});
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<double> o_ref, fin_ref;
  ASSERT_TRUE(testkit::naive_gdn(d.args(o), &o_ref, &fin_ref).ok());

  const int64_t row = c.HV * c.V, covered = c.covered_rows();
  const auto of = o.to_float();
  const auto eo = testkit::compare(test::head_rows(of, covered, row),
                                   test::head_rows(test::to_float_vec(o_ref), covered, row));
  const auto ef = testkit::compare(fin.to_float(), test::to_float_vec(fin_ref));
  EXPECT_EQ(eo.nan_count, 0) << "o has unwritten or NaN elements";
  EXPECT_EQ(ef.nan_count, 0) << "final_state has unwritten or NaN elements";
  EXPECT_LT(eo.rel_l2, o_tolerance(c.dtype)) << "o " << eo.str();
  EXPECT_LT(ef.rel_l2, kStateTol) << "final_state " << ef.str();
  // Rows past cu_seqlens[N] belong to no sequence and keep their poison.
  EXPECT_EQ(test::count_nan(std::vector<float>(of.begin() + covered * row, of.end())),
            c.tail_rows * row);
}

class GdnForward : public ::testing::TestWithParam<GdnCase> {};

TEST_P(GdnForward, ChunkedMatchesNaive) {
  check_against_naive(GetParam(), gdn_chunk_forward, "chunked");
}
TEST_P(GdnForward, RecurrentMatchesNaive) {
  check_against_naive(GetParam(), gdn_recurrent_forward, "recurrent");
}

TEST_P(GdnForward, ChunkedMatchesRecurrent) {
  const GdnCase& c = GetParam();
  const test::GdnData d = test::make_gdn_data(c);
  Buffer o1 = d.make_o(), o2 = d.make_o(), f1 = d.make_state(), f2 = d.make_state();
  for (Buffer* b : {&o1, &o2, &f1, &f2}) b->poison();
  ASSERT_TRUE(gdn_chunk_forward(d.args(o1, &f1)).ok());
  ASSERT_TRUE(gdn_recurrent_forward(d.args(o2, &f2)).ok());
  const int64_t row = c.HV * c.V, covered = c.covered_rows();
  const auto eo = testkit::compare(test::head_rows(o1.to_float(), covered, row),
                                   test::head_rows(o2.to_float(), covered, row));
  const auto ef = testkit::compare(f1.to_float(), f2.to_float());
  EXPECT_LT(eo.rel_l2, o_tolerance(c.dtype)) << eo.str();
  EXPECT_LT(ef.rel_l2, kStateTol) << ef.str();
  EXPECT_EQ(eo.nan_count + ef.nan_count, 0);
}

GdnCase batched(DType dt, int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V) {
  GdnCase c;
  c.dtype = dt;
  c.B = B;
  c.T = T;
  c.H = H;
  c.HV = HV;
  c.K = K;
  c.V = V;
  return c;
}

GdnCase ragged(DType dt, std::vector<int32_t> lens, int64_t H, int64_t HV, int64_t K, int64_t V) {
  GdnCase c = batched(dt, 1, 0, H, HV, K, V);
  c.seqlens = std::move(lens);
  return c;
}

std::vector<GdnCase> forward_cases() {
  std::vector<GdnCase> cs;
  const DType f32 = DType::kFloat32, bf16 = DType::kBFloat16;
  cs.push_back(batched(f32, 2, 100, 1, 1, 32, 32));        // off the 64 grid
  cs.push_back(batched(f32, 1, 37, 2, 4, 32, 16));         // shorter than one chunk
  cs.push_back(batched(bf16, 2, 64, 2, 2, 64, 64));        // exactly one chunk
  cs.back().initial_state = true;
  cs.push_back(batched(bf16, 1, 128, 1, 3, 64, 64));       // exactly two chunks, HV/H = 3
  cs.back().l2norm_in_kernel = true;
  cs.push_back(batched(f32, 1, 1, 1, 2, 16, 16));          // one token
  cs.back().initial_state = true;
  GdnCase r = ragged(f32, {1, 200, 0, 64, 7, 129}, 2, 6, 32, 32);  // uneven, HV/H = 3
  r.tail_rows = 5;
  r.initial_state = true;
  r.l2norm_in_kernel = true;
  r.scale = 0.3f;
  cs.push_back(r);
  r = ragged(bf16, {300, 2, 0, 65}, 1, 2, 64, 32);         // K != V, bf16 beta
  r.beta_dtype = bf16;
  r.initial_state = true;
  cs.push_back(r);
  r = ragged(f32, {0, 0, 3}, 1, 1, 16, 16);                // empty sequences first
  r.initial_state = true;
  cs.push_back(r);
  cs.push_back(batched(DType::kFloat16, 1, 70, 1, 2, 48, 80));  // odd head sizes, fp16
  cs.back().scale = -0.5f;
  cs.push_back(batched(bf16, 1, 200, 2, 4, 128, 128));     // the GPU target shape
  cs.back().initial_state = true;
  cs.back().l2norm_in_kernel = true;
  for (size_t i = 0; i < cs.size(); ++i) cs[i].seed = 100 + i;
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cases, GdnForward, ::testing::ValuesIn(forward_cases()),
                         [](const auto& info) { return "case" + std::to_string(info.index); });

// 4096 tokens: the chunked state pass must not drift from the exact recurrence over 64 chunks.
TEST(GdnForwardLong, ErrorDoesNotAccumulate) {
  GdnCase c = batched(DType::kFloat32, 1, 4096, 1, 2, 128, 128);
  c.initial_state = true;
  c.seed = 7;
  const test::GdnData d = test::make_gdn_data(c);
  Buffer o = d.make_o(), fin = d.make_state();
  o.poison();
  fin.poison();
  ASSERT_TRUE(gdn_chunk_forward(d.args(o, &fin)).ok());
  std::vector<double> o_ref, fin_ref;
  ASSERT_TRUE(testkit::naive_gdn(d.args(o), &o_ref, &fin_ref).ok());
  const int64_t row = c.HV * c.V;
  const auto of = o.to_float();
  const auto orf = test::to_float_vec(o_ref);
  // The first and the last 256 tokens separately: the error at the end is of the same size.
  const auto first = testkit::compare(std::vector<float>(of.begin(), of.begin() + 256 * row),
                                      std::vector<float>(orf.begin(), orf.begin() + 256 * row));
  const auto last = testkit::compare(std::vector<float>(of.end() - 256 * row, of.end()),
                                     std::vector<float>(orf.end() - 256 * row, orf.end()));
  const auto ef = testkit::compare(fin.to_float(), test::to_float_vec(fin_ref));
  EXPECT_LT(first.rel_l2, 5e-6) << first.str();
  EXPECT_LT(last.rel_l2, 5e-6) << last.str();
  EXPECT_LT(ef.rel_l2, 5e-6) << ef.str();
  EXPECT_EQ(test::count_nan(of), 0);
}

// final_state may alias initial_state (a caller updating its states in place).
TEST(GdnForwardState, FinalStateInPlace) {
  GdnCase c = ragged(DType::kBFloat16, {90, 0, 33}, 1, 2, 32, 32);
  c.initial_state = true;
  const test::GdnData d = test::make_gdn_data(c);
  Buffer o1 = d.make_o(), o2 = d.make_o(), fin = d.make_state();
  ASSERT_TRUE(gdn_chunk_forward(d.args(o1, &fin)).ok());
  Buffer states = d.h0.to(cpu());
  GdnChunkArgs a = d.args(o2);
  a.initial_state = states.view();
  a.final_state = states.view();
  ASSERT_TRUE(gdn_chunk_forward(a).ok());
  EXPECT_EQ(std::memcmp(states.data(), fin.data(), fin.bytes()), 0);
  EXPECT_EQ(std::memcmp(o1.data(), o2.data(), o1.bytes()), 0);
}

// q, k and v as slices of one fused projection row (strided views) give the same result.
TEST(GdnForwardStrides, FusedQkvViews) {
  GdnCase c = batched(DType::kBFloat16, 2, 80, 2, 4, 32, 16);
  c.l2norm_in_kernel = true;
  const test::GdnData d = test::make_gdn_data(c);
  const int64_t B = c.B, T = c.T, qk = c.H * c.K, width = 2 * qk + c.HV * c.V;
  Buffer fused(c.dtype, {B, T, width});
  const auto q = d.q.to_float(), k = d.k.to_float(), v = d.v.to_float();
  std::vector<float> f(B * T * width);
  for (int64_t r = 0; r < B * T; ++r) {
    for (int64_t i = 0; i < qk; ++i) f[r * width + i] = q[r * qk + i];
    for (int64_t i = 0; i < qk; ++i) f[r * width + qk + i] = k[r * qk + i];
    for (int64_t i = 0; i < c.HV * c.V; ++i) f[r * width + 2 * qk + i] = v[r * c.HV * c.V + i];
  }
  fused.from_float(f);
  uint16_t* base = static_cast<uint16_t*>(fused.data());
  Buffer o1 = d.make_o(), o2 = d.make_o();
  o1.poison();
  o2.poison();
  ASSERT_TRUE(gdn_chunk_forward(d.args(o1)).ok());
  GdnChunkArgs a = d.args(o2);
  a.q = make_view(base, c.dtype, {B, T, c.H, c.K}, {T * width, width, c.K, 1});
  a.k = make_view(base + qk, c.dtype, {B, T, c.H, c.K}, {T * width, width, c.K, 1});
  a.v = make_view(base + 2 * qk, c.dtype, {B, T, c.HV, c.V}, {T * width, width, c.V, 1});
  ASSERT_TRUE(gdn_chunk_forward(a).ok());
  EXPECT_EQ(std::memcmp(o1.data(), o2.data(), o1.bytes()), 0);
}

}  // namespace
}  // namespace attnkit
