// Mask policies. Every mask of the API is, for a query at position p (bottom-right aligned:
// p = i + Sk - Sq), one interval of visible keys [lo(p), hi(p)]; lo and hi never decrease as p
// grows. That gives the kernels three things cheaply:
//   - the key range a tile of rows [p_min, p_max] can see: [lo(p_min), hi(p_max)];
//   - whether a key tile [j0, j1] is fully visible to every row: lo(p_max) <= j0 && hi(p_min) >= j1
//     (those tiles skip the per-element mask);
//   - the per-element test j in [lo(p), hi(p)] for the partial tiles.
// Bounds are int64 so that p - window_left cannot overflow; callers clamp to [0, Sk - 1].
#pragma once

#include <cstdint>

#include "cuda/attention/portable/fwd_params.h"

namespace attnkit::gpu {

inline constexpr int64_t kUnbounded = int64_t{1} << 40;

// No mask: every key of the sequence is visible (the sequence end is still enforced by clamping).
struct NoMask {
  static constexpr const char* kName = "nomask";
  __device__ explicit NoMask(const FwdParams&) {}
  __device__ __forceinline__ int64_t lo(int64_t) const { return -kUnbounded; }
  __device__ __forceinline__ int64_t hi(int64_t) const { return kUnbounded; }
};

// Sliding window (left, right; -1 = unbounded; causal is right = 0) intersected with chunks of
// `chunk` positions (0 = none), all chosen at run time. Chunks start at multiples of `chunk` with
// floor division, so a query at p < 0 (Sq > Sk) lies in chunk -1 and sees no key.
struct WindowChunkMask {
  static constexpr const char* kName = "mask";
  int left, right, chunk;
  __device__ explicit WindowChunkMask(const FwdParams& p)
      : left(p.window_left), right(p.window_right), chunk(p.chunk_size) {}

  __device__ __forceinline__ int64_t chunk_start(int64_t p) const {
    return (p >= 0 ? p / chunk : -((-p + chunk - 1) / chunk)) * chunk;
  }
  __device__ __forceinline__ int64_t lo(int64_t p) const {
    int64_t l = left >= 0 ? p - left : -kUnbounded;
    if (chunk > 0) l = max(l, chunk_start(p));
    return l;
  }
  __device__ __forceinline__ int64_t hi(int64_t p) const {
    int64_t h = right >= 0 ? p + right : kUnbounded;
    if (chunk > 0) h = min(h, chunk_start(p) + chunk - 1);
    return h;
  }
};

}  // namespace attnkit::gpu
