// Row access for the CPU attention backend: where a query, key or value row of a sequence lives in
// its tensor (batched or ragged Q; contiguous, ragged or paged KV), and conversion of a row to fp32.
// Rows are contiguous in their last dimension (validation guarantees it), so a row is one span.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "api/attention_problem.h"
#include "cpu/half.h"

namespace attnkit::ref {

// Converts n contiguous elements of t starting at element offset `off` to fp32.
inline void load_row(const TensorView& t, int64_t off, int64_t n, float* dst) {
  switch (t.dtype) {
    case DType::kFloat32:
      std::memcpy(dst, static_cast<const float*>(t.data) + off, static_cast<size_t>(n) * 4);
      break;
    case DType::kBFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(t.data) + off;
      for (int64_t i = 0; i < n; ++i) dst[i] = ref::bf16_to_float(src[i]);
      break;
    }
    case DType::kFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(t.data) + off;
      for (int64_t i = 0; i < n; ++i) dst[i] = ref::fp16_to_float(src[i]);
      break;
    }
    case DType::kFloat8E4M3: {
      // All 256 codes decoded once (decode-time loads are the reference's inner loop).
      static const auto kTable = [] {
        std::array<float, 256> t{};
        for (int b = 0; b < 256; ++b) t[b] = ref::e4m3_to_float(static_cast<uint8_t>(b));
        return t;
      }();
      const uint8_t* src = static_cast<const uint8_t*>(t.data) + off;
      for (int64_t i = 0; i < n; ++i) dst[i] = kTable[src[i]];
      break;
    }
    default: break;
  }
}

// Element offsets of the rows of sequence b. Only valid with prob.indices_on_host.
class SeqRows {
 public:
  SeqRows(const detail::AttnProblem& prob, int b) : prob_(prob), b_(b) {}

  // Query row i, head h, in q, o or lse (they share the leading [B, Sq, Hq] / [total_q, Hq] dims).
  int64_t q(const TensorView& t, int64_t i, int h) const {
    if (prob_.q_ragged) return (prob_.cu_q[b_] + i) * t.stride[0] + h * t.stride[1];
    return b_ * t.stride[0] + i * t.stride[1] + h * t.stride[2];
  }

  // Key j, kv head h, in k or v (v has k's layout in all but the last dimension).
  int64_t kv(const TensorView& t, int64_t j, int h) const {
    switch (prob_.kv) {
      case detail::KvLayout::kRagged:
        return (prob_.cu_k[b_] + j) * t.stride[0] + h * t.stride[1];
      case detail::KvLayout::kPaged: {
        const int64_t ps = prob_.page_size();
        const int64_t page = prob_.page_table[b_ * prob_.max_pages + j / ps];
        return page * t.stride[0] + (j % ps) * t.stride[1] + h * t.stride[2];
      }
      case detail::KvLayout::kContiguous:
      default:
        return b_ * t.stride[0] + j * t.stride[1] + h * t.stride[2];
    }
  }

 private:
  const detail::AttnProblem& prob_;
  int64_t b_;
};

}  // namespace attnkit::ref
