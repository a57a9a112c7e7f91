// The CPU attention backend's one inner kernel: c[r][n] (+)= sum_k a[r][k] * b[k][n] for a few rows
// r, with b row-major (scores = Q K^T with K transposed per tile; O += P V). An R x 8 block of c
// stays in registers while k runs, so each b row loaded serves R rows. Written with GCC/Clang
// vector types because the auto-vectoriser turns the plain-array form into shuffles; the generic
// vectors lower to whatever SIMD the target has. Sums run in k order, so results never depend on
// threading or on how callers split rows.
#pragma once

#include <cstdint>
#include <cstring>

namespace attnkit::ref {

namespace tile_detail {
typedef float v4f __attribute__((vector_size(16)));
inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof v); }
}  // namespace tile_detail

template <int R>
void matmul_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 int64_t k0, int64_t k1, int64_t n0, int64_t n1, bool accumulate) {
  using tile_detail::v4f;
  int64_t n = n0;
  for (; n + 8 <= n1; n += 8) {
    v4f lo[R], hi[R];
    for (int r = 0; r < R; ++r) {
      lo[r] = accumulate ? tile_detail::load4(c + r * ldc + n) : v4f{};
      hi[r] = accumulate ? tile_detail::load4(c + r * ldc + n + 4) : v4f{};
    }
    const float* bp = b + k0 * ldb + n;
    for (int64_t k = k0; k < k1; ++k, bp += ldb) {
      const v4f b0 = tile_detail::load4(bp), b1 = tile_detail::load4(bp + 4);
      for (int r = 0; r < R; ++r) {
        const float s = a[r * lda + k];
        const v4f av = {s, s, s, s};
        lo[r] += av * b0;
        hi[r] += av * b1;
      }
    }
    for (int r = 0; r < R; ++r) {
      tile_detail::store4(c + r * ldc + n, lo[r]);
      tile_detail::store4(c + r * ldc + n + 4, hi[r]);
    }
  }
  for (; n < n1; ++n) {  // columns past the last multiple of 8 (no head dim has any)
    for (int r = 0; r < R; ++r) {
      float acc = accumulate ? c[r * ldc + n] : 0.f;
      for (int64_t k = k0; k < k1; ++k) acc += a[r * lda + k] * b[k * ldb + n];
      c[r * ldc + n] = acc;
    }
  }
}

// matmul_rows for 1 to 4 rows.
inline void matmul(int rows, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                   int64_t ldc, int64_t k0, int64_t k1, int64_t n0, int64_t n1, bool accumulate) {
  switch (rows) {
    case 1: return matmul_rows<1>(a, lda, b, ldb, c, ldc, k0, k1, n0, n1, accumulate);
    case 2: return matmul_rows<2>(a, lda, b, ldb, c, ldc, k0, k1, n0, n1, accumulate);
    case 3: return matmul_rows<3>(a, lda, b, ldb, c, ldc, k0, k1, n0, n1, accumulate);
    default: return matmul_rows<4>(a, lda, b, ldb, c, ldc, k0, k1, n0, n1, accumulate);
  }
}

}  // namespace attnkit::ref
