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

// Reads element `off` (in elements) of a float tensor of any float dtype.
inline float load_float(const TensorView& t, int64_t off) {
  switch (t.dtype) {
    case DType::kFloat32: return static_cast<const float*>(t.data)[off];
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(t.data)[off]);
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(t.data)[off]);
    default: return NAN;
  }
}

// Writes element `off`, rounding to the tensor's dtype.
inline void store_float(const TensorView& t, int64_t off, float v) {
  switch (t.dtype) {
    case DType::kFloat32: static_cast<float*>(t.data)[off] = v; break;
    case DType::kBFloat16: static_cast<uint16_t*>(t.data)[off] = float_to_bf16(v); break;
    case DType::kFloat16: static_cast<uint16_t*>(t.data)[off] = float_to_fp16(v); break;
    default: break;
  }
}

// Rounds a value as storing it in `dt` would.
inline float round_to(DType dt, float v) {
  switch (dt) {
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(v));
    case DType::kFloat16: return fp16_to_float(float_to_fp16(v));
    default: return v;
  }
}

}  // namespace attnkit::ref
