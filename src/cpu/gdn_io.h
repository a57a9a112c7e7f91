// Gathering Gated DeltaNet tensor slices into contiguous fp32 buffers and scattering results back,
// for the CPU backend. Views have a contiguous last dimension (validation guarantees it).
#pragma once

#include <algorithm>
#include <cstdint>

#include "api/gdn_problem.h"
#include "cpu/half.h"

namespace attnkit::ref::gdn {

// n consecutive elements from element offset `off`, converted once per span (not per element).
inline void load_span(const TensorView& t, int64_t off, int64_t n, float* dst) {
  switch (t.dtype) {
    case DType::kFloat32: {
      const float* src = static_cast<const float*>(t.data) + off;
      std::copy(src, src + n, dst);
      break;
    }
    case DType::kBFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(t.data) + off;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_float(t, off + i);
  }
}

inline void store_span(const TensorView& t, int64_t off, int64_t n, const float* src) {
  if (t.dtype == DType::kFloat32) {
    std::copy(src, src + n, static_cast<float*>(t.data) + off);
    return;
  }
  for (int64_t i = 0; i < n; ++i) store_float(t, off + i, src[i]);
}

// Rows t0 .. t0+L-1 of head `head` of a [B, T, heads, D] tensor, batch entry b <-> buf[L x D].
inline void load_rows(const TensorView& t, int64_t b, int64_t t0, int64_t L, int64_t head,
                      float* buf) {
  const int64_t D = t.shape[3];
  for (int64_t i = 0; i < L; ++i)
    load_span(t, b * t.stride[0] + (t0 + i) * t.stride[1] + head * t.stride[2], D, buf + i * D);
}

inline void store_rows(const TensorView& t, int64_t b, int64_t t0, int64_t L, int64_t head,
                       const float* buf) {
  const int64_t D = t.shape[3];
  for (int64_t i = 0; i < L; ++i)
    store_span(t, b * t.stride[0] + (t0 + i) * t.stride[1] + head * t.stride[2], D, buf + i * D);
}

// One value per token of head `head` of a [B, T, HV] tensor <-> buf[L].
inline void load_tokens(const TensorView& t, int64_t b, int64_t t0, int64_t L, int64_t head,
                        float* buf) {
  for (int64_t i = 0; i < L; ++i)
    buf[i] = load_float(t, b * t.stride[0] + (t0 + i) * t.stride[1] + head * t.stride[2]);
}

inline void store_tokens(const TensorView& t, int64_t b, int64_t t0, int64_t L, int64_t head,
                         const float* buf) {
  for (int64_t i = 0; i < L; ++i)
    store_float(t, b * t.stride[0] + (t0 + i) * t.stride[1] + head * t.stride[2], buf[i]);
}

// The K x V matrix [i, hv] of a [*, HV, K, V] tensor (states, h) <-> buf[K x V]. States may be
// key-last (V not contiguous, K is): those go element by element.
inline void load_state(const TensorView& t, int64_t i, int64_t hv, float* buf) {
  const int64_t K = t.shape[2], V = t.shape[3], base = i * t.stride[0] + hv * t.stride[1];
  for (int64_t m = 0; m < K; ++m) {
    if (t.stride[3] == 1) {
      load_span(t, base + m * t.stride[2], V, buf + m * V);
    } else {
      for (int64_t n = 0; n < V; ++n) buf[m * V + n] = load_float(t, base + m * t.stride[2] + n * t.stride[3]);
    }
  }
}

inline void store_state(const TensorView& t, int64_t i, int64_t hv, const float* buf) {
  const int64_t K = t.shape[2], V = t.shape[3], base = i * t.stride[0] + hv * t.stride[1];
  for (int64_t m = 0; m < K; ++m) {
    if (t.stride[3] == 1) {
      store_span(t, base + m * t.stride[2], V, buf + m * V);
    } else {
      for (int64_t n = 0; n < V; ++n) store_float(t, base + m * t.stride[2] + n * t.stride[3], buf[m * V + n]);
    }
  }
}

// Where global chunk `index` lies: batch entry, first row, length, sequence.
struct ChunkLoc {
  int64_t index = 0, b = 0, t0 = 0, len = 0, seq = 0;
};

inline ChunkLoc locate_chunk(const detail::GdnProblem& p, int64_t c) {
  // The last sequence whose first chunk is <= c; empty sequences own no chunk, so it is never one.
  const auto it = std::upper_bound(p.chunk_offsets.begin(), p.chunk_offsets.end(), c);
  const int64_t n = (it - p.chunk_offsets.begin()) - 1;
  const int64_t j = c - p.chunk_offsets[n];
  ChunkLoc loc;
  loc.index = c;
  loc.seq = n;
  loc.b = p.batch_of(n);
  loc.t0 = p.seq_start[n] + j * kGdnChunk;
  loc.len = std::min<int64_t>(kGdnChunk, p.seq_len[n] - j * kGdnChunk);
  return loc;
}

}  // namespace attnkit::ref::gdn
