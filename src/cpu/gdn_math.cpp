#include "cpu/gdn_math.h"

#include <cmath>

#include "attnkit/gdn.h"

namespace attnkit::ref::gdn {
namespace {

constexpr int64_t kC = kGdnChunk;

// Eight independent partial sums so the compiler can vectorise without reassociating.
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0.f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

inline void axpy(float a, const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

inline void scal(float a, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

inline void zero(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = 0.f;
}

}  // namespace

void l2_normalize(float* x, int64_t rows, int64_t D) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * D;
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(row[d]) * row[d];
    scal(static_cast<float>(1.0 / std::sqrt(ss + 1e-6)), row, D);
  }
}

void chunk_cumsum(const float* g, int64_t L, float* g_cum) {
  double s = 0;
  for (int64_t i = 0; i < L; ++i) {
    s += g[i];
    g_cum[i] = static_cast<float>(s);
  }
}

void kkt_inverse(const float* k, const float* beta, const float* g_cum, int64_t L, int64_t K,
                 float* a_inv) {
  // (I + A) is unit lower triangular, so its inverse X is too: forward substitution row by row,
  // X[i][j] = -sum_{j <= m < i} A[i][m] X[m][j].
  double A[kC][kC];
  double X[kC][kC];
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < i; ++j)
      A[i][j] = static_cast<double>(beta[i]) * dot(k + i * K, k + j * K, K) *
                std::exp(static_cast<double>(g_cum[i]) - g_cum[j]);
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      double s = 0;
      for (int64_t m = j; m < i; ++m) s += A[i][m] * X[m][j];
      X[i][j] = -s;
    }
    X[i][i] = 1.0;
  }
  for (int64_t i = 0; i < L; ++i)
    for (int64_t c = 0; c < kC; ++c)
      a_inv[i * kC + c] = c <= i ? static_cast<float>(X[i][c]) : 0.f;
}

void wu(const float* a_inv, const float* k, const float* v, const float* beta, const float* g_cum,
        int64_t L, int64_t K, int64_t V, float* w, float* u) {
  float bk[kC];  // beta exp(g_cum): the diagonal applied to k
  for (int64_t j = 0; j < L; ++j) bk[j] = beta[j] * std::exp(g_cum[j]);
  for (int64_t i = 0; i < L; ++i) {
    float* wi = w + i * K;
    float* ui = u + i * V;
    zero(wi, K);
    zero(ui, V);
    for (int64_t j = 0; j < L; ++j) {
      const float x = a_inv[i * kC + j];
      if (x == 0.f) continue;  // the upper triangle of a lower-triangular inverse
      axpy(x * bk[j], k + j * K, wi, K);
      axpy(x * beta[j], v + j * V, ui, V);
    }
  }
}

void chunk_v_new(const float* w, const float* u, const float* S, int64_t L, int64_t K, int64_t V,
                 float* v_new) {
  for (int64_t i = 0; i < L; ++i) {
    float* vi = v_new + i * V;
    for (int64_t c = 0; c < V; ++c) vi[c] = u[i * V + c];
    for (int64_t m = 0; m < K; ++m) axpy(-w[i * K + m], S + m * V, vi, V);
  }
}

void chunk_state_update(const float* k, const float* v_new, const float* g_cum, int64_t L,
                        int64_t K, int64_t V, float* S) {
  if (L == 0) return;
  const float g_last = g_cum[L - 1];
  scal(std::exp(g_last), S, K * V);
  for (int64_t i = 0; i < L; ++i) {
    const float d = std::exp(g_last - g_cum[i]);
    for (int64_t m = 0; m < K; ++m) axpy(k[i * K + m] * d, v_new + i * V, S + m * V, V);
  }
}

void chunk_output(const float* q, const float* k, const float* v_new, const float* S,
                  const float* g_cum, int64_t L, int64_t K, int64_t V, float scale, float* o) {
  for (int64_t i = 0; i < L; ++i) {
    const float* qi = q + i * K;
    float* oi = o + i * V;
    zero(oi, V);
    for (int64_t m = 0; m < K; ++m) axpy(qi[m], S + m * V, oi, V);
    scal(std::exp(g_cum[i]), oi, V);
    for (int64_t j = 0; j <= i; ++j)
      axpy(dot(qi, k + j * K, K) * std::exp(g_cum[i] - g_cum[j]), v_new + j * V, oi, V);
    scal(scale, oi, V);
  }
}

void token_step(float* S, const float* q, const float* k, const float* v, float g, float beta,
                float scale, int64_t K, int64_t V, float* o, float* scratch) {
  scal(std::exp(g), S, K * V);
  zero(scratch, V);
  for (int64_t m = 0; m < K; ++m) axpy(k[m], S + m * V, scratch, V);
  for (int64_t c = 0; c < V; ++c) scratch[c] = beta * (v[c] - scratch[c]);
  for (int64_t m = 0; m < K; ++m) axpy(k[m], scratch, S + m * V, V);
  zero(o, V);
  for (int64_t m = 0; m < K; ++m) axpy(q[m] * scale, S + m * V, o, V);
}

}  // namespace attnkit::ref::gdn
