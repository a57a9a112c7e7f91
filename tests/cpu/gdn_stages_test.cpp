// Each stage of the chunked Gated DeltaNet pipeline against its own definition (gdn.h), computed
// here in fp64 from the same inputs; then the stages composed, with fp32 and bf16 intermediates.
// One ragged batch throughout: partial chunks, an exact chunk, an empty sequence, rows past the
// last sequence (never touched), grouped value heads.
#include <gtest/gtest.h>

#include <cmath>
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
constexpr int64_t kC = kGdnChunk;

struct Chunk {
  int64_t t0, len;
};

class GdnStages : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.dtype = DType::kFloat32;
    c_.seqlens = {70, 0, 64, 5, 130};
    c_.tail_rows = 3;
    c_.H = 2;
    c_.HV = 4;
    c_.K = 32;
    c_.V = 16;
    c_.initial_state = true;
    c_.seed = 11;
    d_ = test::make_gdn_data(c_);
    T_ = c_.rows();
    int64_t start = 0;
    for (int32_t len : c_.seqlens) {
      for (int64_t j = 0; j < len; j += kC) chunks_.push_back({start + j, std::min(kC, len - j)});
      start += len;
    }
    // g_cum by summation, in fp32 storage (the input of the later stages).
    const auto g = d_.g.to_float();
    std::vector<float> gc(g.size(), 0.f);
    for (const Chunk& ch : chunks_)
      for (int64_t hv = 0; hv < c_.HV; ++hv) {
        double s = 0;
        for (int64_t i = 0; i < ch.len; ++i) {
          s += g[(ch.t0 + i) * c_.HV + hv];
          gc[(ch.t0 + i) * c_.HV + hv] = static_cast<float>(s);
        }
      }
    g_cum_ = Buffer(DType::kFloat32, {1, T_, c_.HV});
    g_cum_.from_float(gc);
    gc_ = gc;
  }

  Buffer randn(DType dt, std::vector<int64_t> shape, float stddev) {
    Buffer b(dt, std::move(shape));
    testkit::fill_normal(b, rng_, 0.f, stddev);
    return b;
  }
  Buffer poisoned(DType dt, std::vector<int64_t> shape) {
    Buffer b(dt, std::move(shape));
    b.poison();
    return b;
  }
  // Rows past the last sequence must still hold the poison; every other element a number.
  void expect_covered_only(const Buffer& b, const char* what) {
    const auto x = b.to_float();
    const int64_t per_row = b.numel() / T_;
    const int64_t covered = (T_ - c_.tail_rows) * per_row;
    int64_t nan_in = 0, nan_tail = 0;
    for (int64_t i = 0; i < b.numel(); ++i) (i < covered ? nan_in : nan_tail) += std::isnan(x[i]);
    EXPECT_EQ(nan_in, 0) << what << ": unwritten or NaN elements";
    EXPECT_EQ(nan_tail, c_.tail_rows * per_row) << what << ": rows past cu_seqlens were written";
  }
  double gc(int64_t t, int64_t hv) const { return gc_[t * c_.HV + hv]; }

  test::GdnCase c_;
  test::GdnData d_;
  int64_t T_ = 0;
  std::vector<Chunk> chunks_;
  Buffer g_cum_;
  std::vector<float> gc_;
  std::mt19937_64 rng_{5};
};

TEST_F(GdnStages, CumsumIsChunkLocalPrefixSum) {
  Buffer out = poisoned(DType::kFloat32, {1, T_, c_.HV});
  ASSERT_TRUE(gdn_chunk_cumsum({d_.g.view(), d_.cu.view(), out.view()}).ok());
  expect_covered_only(out, "g_cum");
  const auto got = out.to_float();
  double worst = 0;
  for (int64_t i = 0; i < (T_ - c_.tail_rows) * c_.HV; ++i)
    worst = std::max(worst, std::fabs(got[i] - gc_[i]) / (1.0 + std::fabs(gc_[i])));
  EXPECT_LT(worst, 1e-6);
}

TEST_F(GdnStages, KktInverseInvertsIPlusA) {
  const auto k = d_.k.to_float(), beta = d_.beta.to_float();
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    Buffer a_inv = poisoned(dt, {1, T_, c_.HV, kC});
    ASSERT_TRUE(
        gdn_kkt_inverse({d_.k.view(), d_.beta.view(), g_cum_.view(), d_.cu.view(), a_inv.view()})
            .ok());
    expect_covered_only(a_inv, "a_inv");
    const auto x = a_inv.to_float();
    auto X = [&](int64_t t, int64_t hv, int64_t c) { return double(x[(t * c_.HV + hv) * kC + c]); };
    double worst = 0;
    int64_t nonzero_upper = 0;
    for (const Chunk& ch : chunks_)
      for (int64_t hv = 0; hv < c_.HV; ++hv) {
        const int64_t h = hv / (c_.HV / c_.H);
        // A = strict_lower(diag(beta) (K K^T (.) Gamma))
        std::vector<double> A(kC * kC, 0.0);
        for (int64_t i = 0; i < ch.len; ++i)
          for (int64_t j = 0; j < i; ++j) {
            double kk = 0;
            for (int64_t m = 0; m < c_.K; ++m)
              kk += double(k[((ch.t0 + i) * c_.H + h) * c_.K + m]) *
                    k[((ch.t0 + j) * c_.H + h) * c_.K + m];
            A[i * kC + j] = beta[(ch.t0 + i) * c_.HV + hv] * kk *
                            std::exp(gc(ch.t0 + i, hv) - gc(ch.t0 + j, hv));
          }
        for (int64_t i = 0; i < ch.len; ++i) {
          for (int64_t c = i + 1; c < kC; ++c) nonzero_upper += X(ch.t0 + i, hv, c) != 0.0;
          for (int64_t j = 0; j < ch.len; ++j) {  // ((I + A) a_inv)[i][j]
            double s = X(ch.t0 + i, hv, j);
            for (int64_t m = 0; m < i; ++m) s += A[i * kC + m] * X(ch.t0 + m, hv, j);
            worst = std::max(worst, std::fabs(s - (i == j ? 1.0 : 0.0)));
          }
        }
      }
    EXPECT_EQ(nonzero_upper, 0) << "a_inv must be zero right of the diagonal";
    // fp32: a few float roundings of O(1) entries; bf16: its unit roundoff 2^-8.
    EXPECT_LT(worst, dt == DType::kFloat32 ? 1e-6 : 4e-3) << to_string(dt);
  }
}

TEST_F(GdnStages, WuAreMatrixProducts) {
  // A dense a_inv (not triangular) so every column of the chunk is exercised.
  Buffer a_inv = randn(DType::kFloat32, {1, T_, c_.HV, kC}, 0.3f);
  const auto x = a_inv.to_float(), k = d_.k.to_float(), v = d_.v.to_float(),
             beta = d_.beta.to_float();
  std::vector<float> w_ref((T_ - c_.tail_rows) * c_.HV * c_.K), u_ref((T_ - c_.tail_rows) * c_.HV * c_.V);
  for (const Chunk& ch : chunks_)
    for (int64_t hv = 0; hv < c_.HV; ++hv) {
      const int64_t h = hv / (c_.HV / c_.H);
      for (int64_t i = 0; i < ch.len; ++i) {
        const int64_t ti = ch.t0 + i;
        for (int64_t m = 0; m < c_.K; ++m) {
          double s = 0;
          for (int64_t j = 0; j < ch.len; ++j) {
            const int64_t tj = ch.t0 + j;
            s += double(x[(ti * c_.HV + hv) * kC + j]) * beta[tj * c_.HV + hv] *
                 std::exp(gc(tj, hv)) * k[(tj * c_.H + h) * c_.K + m];
          }
          w_ref[(ti * c_.HV + hv) * c_.K + m] = float(s);
        }
        for (int64_t m = 0; m < c_.V; ++m) {
          double s = 0;
          for (int64_t j = 0; j < ch.len; ++j) {
            const int64_t tj = ch.t0 + j;
            s += double(x[(ti * c_.HV + hv) * kC + j]) * beta[tj * c_.HV + hv] *
                 v[(tj * c_.HV + hv) * c_.V + m];
          }
          u_ref[(ti * c_.HV + hv) * c_.V + m] = float(s);
        }
      }
    }
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    Buffer w = poisoned(dt, {1, T_, c_.HV, c_.K}), u = poisoned(dt, {1, T_, c_.HV, c_.V});
    ASSERT_TRUE(gdn_wu({d_.k.view(), d_.v.view(), d_.beta.view(), g_cum_.view(), a_inv.view(),
                        d_.cu.view(), w.view(), u.view()})
                    .ok());
    expect_covered_only(w, "w");
    expect_covered_only(u, "u");
    const double tol = dt == DType::kFloat32 ? 1e-6 : 4e-3;  // bf16: its rounding of the result
    const auto ew = testkit::compare(test::head_rows(w.to_float(), T_ - c_.tail_rows, c_.HV * c_.K), w_ref);
    const auto eu = testkit::compare(test::head_rows(u.to_float(), T_ - c_.tail_rows, c_.HV * c_.V), u_ref);
    EXPECT_LT(ew.rel_l2, tol) << to_string(dt) << " w " << ew.str();
    EXPECT_LT(eu.rel_l2, tol) << to_string(dt) << " u " << eu.str();
  }
}

TEST_F(GdnStages, StatePassFollowsItsRecurrence) {
  Buffer w = randn(DType::kFloat32, {1, T_, c_.HV, c_.K}, 1.f / std::sqrt(float(c_.K)));
  Buffer u = randn(DType::kFloat32, {1, T_, c_.HV, c_.V}, 1.f);
  const auto k = d_.k.to_float(), wf = w.to_float(), uf = u.to_float(), h0 = d_.h0.to_float();
  const int64_t NC = static_cast<int64_t>(chunks_.size()), N = c_.num_seqs(), KV = c_.K * c_.V;
  const int64_t covered = T_ - c_.tail_rows;
  std::vector<float> h_ref(NC * c_.HV * KV), vn_ref(covered * c_.HV * c_.V), fin_ref(N * c_.HV * KV);
  for (int64_t hv = 0; hv < c_.HV; ++hv) {
    const int64_t h = hv / (c_.HV / c_.H);
    int64_t ci = 0;
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> S(h0.begin() + (n * c_.HV + hv) * KV, h0.begin() + (n * c_.HV + hv + 1) * KV);
      for (int64_t j = 0; j < c_.seqlens[n]; j += kC, ++ci) {
        const Chunk ch = chunks_[ci];
        for (int64_t e = 0; e < KV; ++e) h_ref[(ci * c_.HV + hv) * KV + e] = float(S[e]);
        std::vector<double> vn(ch.len * c_.V);
        for (int64_t i = 0; i < ch.len; ++i)  // v_new = u - w S
          for (int64_t cv = 0; cv < c_.V; ++cv) {
            double s = uf[((ch.t0 + i) * c_.HV + hv) * c_.V + cv];
            for (int64_t m = 0; m < c_.K; ++m)
              s -= double(wf[((ch.t0 + i) * c_.HV + hv) * c_.K + m]) * S[m * c_.V + cv];
            vn[i * c_.V + cv] = s;
            vn_ref[((ch.t0 + i) * c_.HV + hv) * c_.V + cv] = float(s);
          }
        const double gl = gc(ch.t0 + ch.len - 1, hv);
        for (int64_t m = 0; m < c_.K; ++m)  // S = exp(g_last) S + K^T diag(exp(g_last - g)) v_new
          for (int64_t cv = 0; cv < c_.V; ++cv) {
            double s = std::exp(gl) * S[m * c_.V + cv];
            for (int64_t i = 0; i < ch.len; ++i)
              s += double(k[((ch.t0 + i) * c_.H + h) * c_.K + m]) * std::exp(gl - gc(ch.t0 + i, hv)) *
                   vn[i * c_.V + cv];
            S[m * c_.V + cv] = s;
          }
      }
      for (int64_t e = 0; e < KV; ++e) fin_ref[(n * c_.HV + hv) * KV + e] = float(S[e]);
    }
  }
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    Buffer hb = poisoned(dt, {NC, c_.HV, c_.K, c_.V}), vn = poisoned(dt, {1, T_, c_.HV, c_.V});
    Buffer fin = poisoned(DType::kFloat32, {N, c_.HV, c_.K, c_.V});
    GdnStateArgs a{d_.k.view(), w.view(), u.view(), g_cum_.view(), d_.cu.view(), d_.h0.view(),
                   hb.view(), vn.view(), fin.view()};
    ASSERT_TRUE(gdn_state_pass(a).ok());
    expect_covered_only(vn, "v_new");
    const double tol = dt == DType::kFloat32 ? 1e-6 : 4e-3;  // bf16: rounding of h and v_new
    const auto eh = testkit::compare(hb.to_float(), h_ref);
    const auto ev = testkit::compare(test::head_rows(vn.to_float(), covered, c_.HV * c_.V), vn_ref);
    const auto ef = testkit::compare(fin.to_float(), fin_ref);
    EXPECT_LT(eh.rel_l2, tol) << to_string(dt) << " h " << eh.str();
    EXPECT_LT(ev.rel_l2, tol) << to_string(dt) << " v_new " << ev.str();
    EXPECT_LT(ef.rel_l2, 1e-6) << to_string(dt) << " final_state " << ef.str();  // always fp32
    EXPECT_EQ(eh.nan_count + ef.nan_count, 0);
  }
  // The empty sequence (n = 1) passes its initial state through unchanged.
  Buffer hb(DType::kFloat32, {NC, c_.HV, c_.K, c_.V}), vn(DType::kFloat32, {1, T_, c_.HV, c_.V});
  Buffer fin = poisoned(DType::kFloat32, {N, c_.HV, c_.K, c_.V});
  ASSERT_TRUE(gdn_state_pass({d_.k.view(), w.view(), u.view(), g_cum_.view(), d_.cu.view(),
                              d_.h0.view(), hb.view(), vn.view(), fin.view()})
                  .ok());
  EXPECT_EQ(std::memcmp(static_cast<const float*>(fin.data()) + c_.HV * KV,
                        static_cast<const float*>(d_.h0.data()) + c_.HV * KV, c_.HV * KV * 4),
            0);
}

TEST_F(GdnStages, OutputIsInterPlusIntraChunk) {
  const int64_t NC = static_cast<int64_t>(chunks_.size()), covered = T_ - c_.tail_rows;
  const float scale = 0.37f;
  Buffer vn = randn(DType::kFloat32, {1, T_, c_.HV, c_.V}, 1.f);
  Buffer hb = randn(DType::kFloat32, {NC, c_.HV, c_.K, c_.V}, 0.5f);
  const auto q = d_.q.to_float(), k = d_.k.to_float(), vf = vn.to_float(), hf = hb.to_float();
  std::vector<float> o_ref(covered * c_.HV * c_.V);
  for (int64_t ci = 0; ci < NC; ++ci)
    for (int64_t hv = 0; hv < c_.HV; ++hv) {
      const Chunk ch = chunks_[ci];
      const int64_t h = hv / (c_.HV / c_.H);
      auto qk = [&](int64_t ti, int64_t tj) {
        double s = 0;
        for (int64_t m = 0; m < c_.K; ++m)
          s += double(q[(ti * c_.H + h) * c_.K + m]) * k[(tj * c_.H + h) * c_.K + m];
        return s;
      };
      for (int64_t i = 0; i < ch.len; ++i) {
        const int64_t ti = ch.t0 + i;
        for (int64_t cv = 0; cv < c_.V; ++cv) {
          double inter = 0, intra = 0;
          for (int64_t m = 0; m < c_.K; ++m)
            inter += double(q[(ti * c_.H + h) * c_.K + m]) * hf[((ci * c_.HV + hv) * c_.K + m) * c_.V + cv];
          for (int64_t j = 0; j <= i; ++j)
            intra += qk(ti, ch.t0 + j) * std::exp(gc(ti, hv) - gc(ch.t0 + j, hv)) *
                     vf[((ch.t0 + j) * c_.HV + hv) * c_.V + cv];
          o_ref[(ti * c_.HV + hv) * c_.V + cv] = float(scale * (std::exp(gc(ti, hv)) * inter + intra));
        }
      }
    }
  Buffer o = poisoned(DType::kFloat32, {1, T_, c_.HV, c_.V});
  GdnOutputArgs a{d_.q.view(), d_.k.view(), vn.view(), hb.view(), g_cum_.view(), d_.cu.view(),
                  o.view(), scale};
  ASSERT_TRUE(gdn_chunk_output(a).ok());
  expect_covered_only(o, "o");
  const auto e = testkit::compare(test::head_rows(o.to_float(), covered, c_.HV * c_.V), o_ref);
  EXPECT_LT(e.rel_l2, 1e-6) << e.str();
}

// The five stages run one after another, as a GPU pipeline would, with fp32 or bf16 intermediates.
class GdnStagePipeline : public ::testing::TestWithParam<DType> {};

TEST_P(GdnStagePipeline, MatchesNaiveAndFusedForward) {
  const DType inter = GetParam();
  test::GdnCase c;
  c.dtype = DType::kBFloat16;
  c.seqlens = {130, 0, 64, 1, 77};
  c.H = 2;
  c.HV = 4;
  c.K = c.V = 64;
  c.initial_state = true;
  c.seed = 21;
  const test::GdnData d = test::make_gdn_data(c);
  const int64_t T = c.rows(), HV = c.HV;
  int64_t NC = 0;
  ASSERT_TRUE(gdn_num_chunks(d.q.view(), d.cu.view(), &NC).ok());
  ASSERT_EQ(NC, 3 + 0 + 1 + 1 + 2);

  Buffer g_cum(DType::kFloat32, {1, T, HV}), a_inv(inter, {1, T, HV, kC}), w(inter, {1, T, HV, c.K}),
      u(inter, {1, T, HV, c.V}), h(inter, {NC, HV, c.K, c.V}), vn(inter, {1, T, HV, c.V});
  Buffer o = d.make_o(), fin = d.make_state();
  for (Buffer* b : {&g_cum, &a_inv, &w, &u, &h, &vn, &o, &fin}) b->poison();
  const TensorView cu = d.cu.view();
  ASSERT_TRUE(gdn_chunk_cumsum({d.g.view(), cu, g_cum.view()}).ok());
  ASSERT_TRUE(gdn_kkt_inverse({d.k.view(), d.beta.view(), g_cum.view(), cu, a_inv.view()}).ok());
  ASSERT_TRUE(gdn_wu({d.k.view(), d.v.view(), d.beta.view(), g_cum.view(), a_inv.view(), cu,
                      w.view(), u.view()})
                  .ok());
  ASSERT_TRUE(gdn_state_pass({d.k.view(), w.view(), u.view(), g_cum.view(), cu, d.h0.view(),
                              h.view(), vn.view(), fin.view()})
                  .ok());
  ASSERT_TRUE(gdn_chunk_output({d.q.view(), d.k.view(), vn.view(), h.view(), g_cum.view(), cu,
                                o.view(), 0.f})
                  .ok());

  std::vector<double> o_ref, fin_ref;
  ASSERT_TRUE(testkit::naive_gdn(d.args(o), &o_ref, &fin_ref).ok());
  const auto eo = testkit::compare(o.to_float(), test::to_float_vec(o_ref));
  const auto ef = testkit::compare(fin.to_float(), test::to_float_vec(fin_ref));
  // bf16 intermediates: docs/design.md's 1e-2. fp32 ones: only o's own bf16 rounding (2^-8 relative at
  // most per element) and fp32 arithmetic remain.
  const double o_tol = inter == DType::kFloat32 ? 3e-3 : testkit::kGdn.rel_l2;
  const double s_tol = inter == DType::kFloat32 ? 5e-6 : testkit::kGdn.rel_l2;
  EXPECT_EQ(eo.nan_count + ef.nan_count, 0);
  EXPECT_LT(eo.rel_l2, o_tol) << "o " << eo.str();
  EXPECT_LT(ef.rel_l2, s_tol) << "final_state " << ef.str();
  if (inter == DType::kBFloat16) EXPECT_TRUE(testkit::within(eo, testkit::kGdn)) << eo.str();

  if (inter == DType::kFloat32) {  // the fused forward runs the same stages: same numbers
    Buffer o2 = d.make_o(), fin2 = d.make_state();
    o2.poison();
    fin2.poison();
    ASSERT_TRUE(gdn_chunk_forward(d.args(o2, &fin2)).ok());
    EXPECT_LE(testkit::compare(o2.to_float(), o.to_float()).max_abs, 0.0);
    EXPECT_LE(testkit::compare(fin2.to_float(), fin.to_float()).rel_l2, 1e-7);
  }
}

INSTANTIATE_TEST_SUITE_P(Intermediates, GdnStagePipeline,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace attnkit
