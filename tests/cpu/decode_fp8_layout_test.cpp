// The FP8 decode path's fragment bookkeeping (decode_fp8_layout.h), replayed lane by lane on the
// CPU: ldmatrix (.trans) and mma.m16n8k16 as the PTX ISA defines their fragments, fed through the
// kernel's lane addresses, Q's pair slots, V's byte permute and the accumulator's dim map. Q K^T
// and P V must come out exactly; a wrong slot, address or permute scrambles dims or keys.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "cpu/half.h"
#include "cuda/attention/portable/decode_fp8_layout.h"

namespace attnkit::gpu {
namespace {

constexpr int kKeys = 16, kDims = 32, kRows = 16;
using Bytes = std::array<std::array<uint8_t, kDims>, kKeys>;  // [key][dim] e4m3 codes

// ldmatrix.x4 (b16) over byte rows: lane L's register i, given each lane's (row, byte) address.
uint32_t ldmatrix(const Bytes& m, const int (&row)[32], const int (&byte)[32], int lane, int i,
                  bool trans) {
  const int g = lane / 4, t = lane % 4;
  auto b16 = [&](int r, int c) {  // element c (2 bytes) of matrix i's row r
    const int src = 8 * i + r;
    return uint32_t{m[row[src]][byte[src] + 2 * c]} | uint32_t{m[row[src]][byte[src] + 2 * c + 1]} << 8;
  };
  if (!trans) return b16(g, 2 * t) | b16(g, 2 * t + 1) << 16;
  return b16(2 * t, g) | b16(2 * t + 1, g) << 16;
}

uint32_t byte_perm(uint32_t x, uint32_t selector) {
  uint32_t out = 0;
  for (int n = 0; n < 4; ++n) out |= ((x >> (8 * ((selector >> (4 * n)) & 7))) & 0xffu) << (8 * n);
  return out;
}

double e4m3(uint32_t byte) { return ref::e4m3_to_float(static_cast<uint8_t>(byte)); }

// mma.m16n8k16 with fp32 accumulation: A [16][16]; B given per lane as b0 (k = 2t, 2t+1; n = g)
// and b1 (k = 2t+8, 2t+9), each two e4m3 bytes (low first). Returns C [16][8].
std::array<std::array<double, 8>, 16> mma(const double (&a)[16][16], const uint32_t (&b0)[32],
                                          const uint32_t (&b1)[32]) {
  double b[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 2; ++e) {
      b[2 * t + e][g] = e4m3((b0[lane] >> (8 * e)) & 0xff);
      b[2 * t + 8 + e][g] = e4m3((b1[lane] >> (8 * e)) & 0xff);
    }
  }
  std::array<std::array<double, 8>, 16> c{};
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) c[m][n] += a[m][k] * b[k][n];
  return c;
}

Bytes random_codes(std::mt19937_64& rng) {
  Bytes m;
  for (auto& r : m)
    for (auto& x : r) {
      do x = static_cast<uint8_t>(rng()); while ((x & 0x7f) == 0x7f);  // no NaN codes
    }
  return m;
}

TEST(DecodeFp8Layout, QTimesKTransposed) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd;
  const Bytes k = random_codes(rng);
  double q[kRows][kDims], sq[kRows][kDims];  // Q, and Q as the kernel stores it (pair slots)
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < kDims; ++d) q[r][d] = nd(rng);
  for (int r = 0; r < kRows; ++r)
    for (int w = 0; w < kDims / 2; ++w)
      for (int e = 0; e < 2; ++e) sq[r][(w / 8) * 16 + 2 * q_pair_slot(w % 8) + e] = q[r][2 * w + e];
  int row[32], byte[32];
  for (int l = 0; l < 32; ++l) row[l] = fp8_k_lane_key(l), byte[l] = fp8_k_lane_byte(l);
  uint32_t rk[4][32];
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) rk[i][l] = ldmatrix(k, row, byte, l, i, false);
  double s[kRows][kKeys] = {};
  for (int sl = 0; sl < 2; ++sl) {  // as the kernel: b[nb] from rk[2 nb + sl], lo / hi halves
    double a[16][16];
    for (int m = 0; m < 16; ++m)
      for (int kk = 0; kk < 16; ++kk) a[m][kk] = sq[m][sl * 16 + kk];
    for (int nb = 0; nb < 2; ++nb) {
      uint32_t b0[32], b1[32];
      for (int l = 0; l < 32; ++l) b0[l] = rk[2 * nb + sl][l] & 0xffff, b1[l] = rk[2 * nb + sl][l] >> 16;
      const auto c = mma(a, b0, b1);
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) s[m][nb * 8 + n] += c[m][n];
    }
  }
  for (int m = 0; m < kRows; ++m)
    for (int j = 0; j < kKeys; ++j) {
      double want = 0;
      for (int d = 0; d < kDims; ++d) want += q[m][d] * e4m3(k[j][d]);
      ASSERT_NEAR(s[m][j], want, 1e-9 * (1 + std::abs(want))) << "row " << m << " key " << j;
    }
}

TEST(DecodeFp8Layout, PTimesV) {
  std::mt19937_64 rng(6);
  std::normal_distribution<double> nd;
  const Bytes v = random_codes(rng);
  double p[16][16];
  for (auto& r : p)
    for (auto& x : r) x = nd(rng);
  int row[32], byte[32];
  for (int l = 0; l < 32; ++l) row[l] = fp8_v_lane_key(l), byte[l] = fp8_v_lane_byte(l);
  uint32_t rv[4][32];
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) rv[i][l] = ldmatrix(v, row, byte, l, i, true);
  double o[kRows][kDims];
  for (auto& r : o)
    for (auto& x : r) x = NAN;
  for (int ch = 0; ch < 2; ++ch) {
    uint32_t even[2][32], odd[2][32];  // as fp8_v_pairs: [0] keys 0-7 (rv[2ch]), [1] keys 8-15
    for (int l = 0; l < 32; ++l)
      for (int half = 0; half < 2; ++half) {
        const uint32_t x = byte_perm(rv[2 * ch + half][l], kFp8VPairSelector);
        even[half][l] = x & 0xffff;
        odd[half][l] = x >> 16;
      }
    for (int parity = 0; parity < 2; ++parity) {
      const auto c = parity ? mma(p, odd[0], odd[1]) : mma(p, even[0], even[1]);
      for (int l = 0; l < 32; ++l)  // the accumulator fragment of lane l, stored by dim
        for (int e = 0; e < 4; ++e) {
          const int m = l / 4 + (e >= 2 ? 8 : 0), n = 2 * (l % 4) + (e & 1);
          o[m][ch * 16 + fp8_o_dim(l % 4, e, parity)] = c[m][n];
        }
    }
  }
  for (int m = 0; m < kRows; ++m)
    for (int d = 0; d < kDims; ++d) {
      double want = 0;
      for (int j = 0; j < kKeys; ++j) want += p[m][j] * e4m3(v[j][d]);
      ASSERT_NEAR(o[m][d], want, 1e-9 * (1 + std::abs(want))) << "row " << m << " dim " << d;
    }
}

// bf16 queries become fp16 MMA operands as q 2^-e: for every bf16 amax the largest value lands in
// [2^14, 2^15), and every bf16 value of magnitude in [amax 2^-28, amax] survives the round trip
// through fp16 exactly; the edge cases give 0.
TEST(DecodeFp8Layout, QExponentKeepsBf16QueriesExactInFp16) {
  std::mt19937 rng(11);
  for (uint32_t a = 0x0080; a < 0x7f80; a += 1) {  // every positive normal bf16 amax
    const float amax = ref::bf16_to_float(static_cast<uint16_t>(a));
    const int e = fp8_q_exponent(amax);
    if (amax < 0x1p-85f) {
      ASSERT_EQ(e, -100) << amax;
      continue;
    }
    const float top = std::ldexp(amax, -e);
    ASSERT_TRUE(top >= 0x1p14f && top < 0x1p15f) << "amax " << amax << " e " << e;
    for (int i = 0; i < 8; ++i) {  // bf16 values in [amax 2^-28, amax]
      const float v = ref::bf16_to_float(ref::float_to_bf16(std::ldexp(amax, -static_cast<int>(rng() % 29)) *
                                                  (0.5f + (rng() % 1000) / 2000.f)));
      if (v < std::ldexp(amax, -28) || v > amax) continue;
      const float scaled = std::ldexp(v, -e);
      ASSERT_EQ(ref::fp16_to_float(ref::float_to_fp16(scaled)), scaled) << "v " << v << " amax " << amax;
    }
  }
  EXPECT_EQ(fp8_q_exponent(0.f), 0);
  EXPECT_EQ(fp8_q_exponent(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(fp8_q_exponent(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(fp8_q_exponent(std::numeric_limits<float>::denorm_min()), -100);
  EXPECT_EQ(fp8_q_exponent(std::numeric_limits<float>::max()), 113);
  EXPECT_EQ(fp8_q_exponent(1.f), -14);
  EXPECT_TRUE(std::isfinite(std::ldexp(1.f, 113)) && std::ldexp(1.f, -100) > 0.f);
}

}  // namespace
}  // namespace attnkit::gpu
