// Random Gated DeltaNet test cases from a small description (GdnCase): host buffers for every input
// in realistic ranges, and the GdnChunkArgs viewing them. Device-agnostic: build on the host with
// make_gdn_data, then `to(cuda())` for a GPU run.
//   q, k: randn, L2-normalised per token and head (unless the op is asked to normalise them);
//   v: randn; g = logsigmoid(randn) <= 0; beta = sigmoid(randn); initial state 0.5 randn.
#pragma once

#include <cmath>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attnkit/gdn.h"
#include "testkit/buffer.h"

namespace attnkit::test {

struct GdnCase {
  DType dtype = DType::kBFloat16;       // q, k, v, o
  DType beta_dtype = DType::kFloat32;
  int64_t B = 1, T = 64;                // batched layout (ignored when seqlens is given)
  std::vector<int32_t> seqlens;         // non-empty: ragged batch with cu_seqlens, B = 1
  int64_t tail_rows = 0;                // ragged: rows past cu_seqlens[N] (belong to no sequence)
  int64_t H = 1, HV = 1, K = 64, V = 64;
  bool l2norm_in_kernel = false;        // else q/k arrive normalised
  bool initial_state = false;
  float scale = 0.f;
  uint64_t seed = 1;

  bool ragged() const { return !seqlens.empty(); }
  int64_t num_seqs() const { return ragged() ? static_cast<int64_t>(seqlens.size()) : B; }
  int64_t batch() const { return ragged() ? 1 : B; }
  int64_t rows() const {
    return ragged() ? std::accumulate(seqlens.begin(), seqlens.end(), int64_t{0}) + tail_rows : T;
  }
  // Rows that belong to a sequence, over all batch entries (a prefix of each batch entry).
  int64_t covered_rows() const { return ragged() ? rows() - tail_rows : B * T; }

  std::string str() const {
    std::ostringstream os;
    os << to_string(dtype) << " H=" << H << " HV=" << HV << " K=" << K << " V=" << V;
    if (ragged()) {
      os << " seqlens=[";
      for (size_t i = 0; i < seqlens.size(); ++i) os << (i ? "," : "") << seqlens[i];
      os << "]";
      if (tail_rows) os << " tail=" << tail_rows;
    } else {
      os << " B=" << B << " T=" << T;
    }
    if (l2norm_in_kernel) os << " l2norm";
    if (initial_state) os << " h0";
    if (scale != 0) os << " scale=" << scale;
    if (beta_dtype != DType::kFloat32) os << " beta=" << to_string(beta_dtype);
    return os.str();
  }
};

// gtest prints parameters with this.
inline void PrintTo(const GdnCase& c, std::ostream* os) { *os << c.str(); }

struct GdnData {
  GdnCase c;
  testkit::Buffer q, k, v, g, beta, cu, h0;

  // Views of the inputs, with o (and optionally final_state) as outputs.
  GdnChunkArgs args(const testkit::Buffer& o, const testkit::Buffer* final_state = nullptr) const {
    GdnChunkArgs a;
    a.q = q.view();
    a.k = k.view();
    a.v = v.view();
    a.g = g.view();
    a.beta = beta.view();
    if (c.ragged()) a.cu_seqlens = cu.view();
    if (c.initial_state) a.initial_state = h0.view();
    if (final_state) a.final_state = final_state->view();
    a.o = o.view();
    a.scale = c.scale;
    a.use_qk_l2norm = c.l2norm_in_kernel;
    return a;
  }
  testkit::Buffer make_o(Device d = cpu()) const {
    return testkit::Buffer(c.dtype, {c.batch(), c.rows(), c.HV, c.V}, d);
  }
  testkit::Buffer make_state(Device d = cpu()) const {
    return testkit::Buffer(DType::kFloat32, {c.num_seqs(), c.HV, c.K, c.V}, d);
  }
  GdnData to(Device d) const {
    GdnData r{c, q.to(d), k.to(d), v.to(d), g.to(d), beta.to(d), {}, {}};
    if (c.ragged()) r.cu = cu.to(d);
    if (c.initial_state) r.h0 = h0.to(d);
    return r;
  }
};

// Rows of [.., HV, D] values normalised per (row, head) of width D.
inline std::vector<float> gdn_l2_rows(std::vector<float> x, int64_t D) {
  for (size_t r = 0; r + D <= x.size(); r += D) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(x[r + d]) * x[r + d];
    const double inv = 1.0 / std::sqrt(ss + 1e-6);
    for (int64_t d = 0; d < D; ++d) x[r + d] = float(x[r + d] * inv);
  }
  return x;
}

inline GdnData make_gdn_data(const GdnCase& c) {
  using testkit::Buffer;
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randn = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& e : x) e = nd(rng);
    return x;
  };
  const int64_t B = c.batch(), T = c.rows();
  GdnData d{c,
            Buffer(c.dtype, {B, T, c.H, c.K}),
            Buffer(c.dtype, {B, T, c.H, c.K}),
            Buffer(c.dtype, {B, T, c.HV, c.V}),
            Buffer(DType::kFloat32, {B, T, c.HV}),
            Buffer(c.beta_dtype, {B, T, c.HV}),
            {},
            {}};
  const int64_t nqk = B * T * c.H * c.K;
  d.q.from_float(c.l2norm_in_kernel ? randn(nqk) : gdn_l2_rows(randn(nqk), c.K));
  d.k.from_float(c.l2norm_in_kernel ? randn(nqk) : gdn_l2_rows(randn(nqk), c.K));
  d.v.from_float(randn(B * T * c.HV * c.V));
  std::vector<float> g = randn(B * T * c.HV), beta = randn(B * T * c.HV);
  for (auto& x : g) x = -std::log1p(std::exp(-x));  // logsigmoid
  for (auto& x : beta) x = 1.f / (1.f + std::exp(-x));
  d.g.from_float(g);
  d.beta.from_float(beta);
  if (c.ragged()) {
    std::vector<int32_t> cu(1, 0);
    for (int32_t l : c.seqlens) cu.push_back(cu.back() + l);
    d.cu = Buffer(DType::kInt32, {static_cast<int64_t>(cu.size())});
    d.cu.from_int(cu);
  }
  if (c.initial_state) {
    d.h0 = Buffer(DType::kFloat32, {c.num_seqs(), c.HV, c.K, c.V});
    std::vector<float> h = randn(d.h0.numel());
    for (auto& x : h) x *= 0.5f;
    d.h0.from_float(h);
  }
  return d;
}

inline std::vector<float> to_float_vec(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// The first `rows` rows of width `width` (for outputs whose tail rows belong to no sequence).
inline std::vector<float> head_rows(const std::vector<float>& x, int64_t rows, int64_t width) {
  return std::vector<float>(x.begin(), x.begin() + rows * width);
}

inline int64_t count_nan(const std::vector<float>& x) {
  int64_t n = 0;
  for (float e : x) n += std::isnan(e) ? 1 : 0;
  return n;
}

}  // namespace attnkit::test
