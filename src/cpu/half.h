// Host conversions between fp32 and the 16-bit float formats (round to nearest even), and strided
// element access for the CPU backend.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attnkit/tensor.h"

namespace attnkit::ref {

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400u) == 0);
      u = sign | ((127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absu < 0x38800000u) {  // subnormal or zero in fp16
    // value * 2^24 rounded to nearest even gives the fp16 subnormal mantissa
    float a;
    std::memcpy(&a, &absu, 4);
    const float scaled = a * 16777216.0f;  // 2^24
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t e = ((absu >> 23) - 127 + 15);
  uint32_t m = absu & 0x7fffffu;
  uint32_t half = (e << 10) | (m >> 13);
  const uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

// OCP e4m3 ("fn"): bias 7, 3 mantissa bits, subnormals below 2^-6, no infinities, 0x7f / 0xff NaN,
// largest finite 448.
inline float e4m3_to_float(uint8_t b) {
  const float sign = (b & 0x80u) ? -1.f : 1.f;
  const int e = (b >> 3) & 0xf, m = b & 0x7;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);
}

// Round to nearest even, saturating to +-448 (what FP8 caches store; NaN stays NaN).
inline uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));  // 8 = 2^-6
  int ex;
  std::frexp(a, &ex);  // a = fr * 2^ex, fr in [0.5, 1): unbiased exponent ex - 1
  int e = ex - 1;
  int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - e)));  // in [8, 16]
  if (q == 16) q = 8, ++e;
  return sign | static_cast<uint8_t>(((e + 7) << 3) | (q - 8));
}

// Reads element `off` (in elements) of a float tensor of any float dtype.
inline float load_float(const TensorView& t, int64_t off) {
  switch (t.dtype) {
    case DType::kFloat32: return static_cast<const float*>(t.data)[off];
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(t.data)[off]);
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(t.data)[off]);
    case DType::kFloat8E4M3: return e4m3_to_float(static_cast<const uint8_t*>(t.data)[off]);
    default: return NAN;
  }
}

// Writes element `off`, rounding to the tensor's dtype.
inline void store_float(const TensorView& t, int64_t off, float v) {
  switch (t.dtype) {
    case DType::kFloat32: static_cast<float*>(t.data)[off] = v; break;
    case DType::kBFloat16: static_cast<uint16_t*>(t.data)[off] = float_to_bf16(v); break;
    case DType::kFloat16: static_cast<uint16_t*>(t.data)[off] = float_to_fp16(v); break;
    case DType::kFloat8E4M3: static_cast<uint8_t*>(t.data)[off] = float_to_e4m3(v); break;
    default: break;
  }
}

// Rounds a value as storing it in `dt` would.
inline float round_to(DType dt, float v) {
  switch (dt) {
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(v));
    case DType::kFloat16: return fp16_to_float(float_to_fp16(v));
    case DType::kFloat8E4M3: return e4m3_to_float(float_to_e4m3(v));
    default: return v;
  }
}

}  // namespace attnkit::ref
