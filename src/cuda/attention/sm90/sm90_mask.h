// Mask policies of the Hopper prefill kernel, and what the kernel asks of them.
//
// Every mask of the API is, for a query at position p = row + Sk - Sq (bottom-right aligned), one
// interval of visible keys [lo(p), hi(p)] whose ends never decrease as p grows. A mask type gives
// lo and hi (unclamped); from them alone, for one query tile:
//   - the KV tiles any of its rows can see: keys [lo(p_first), hi(p_last)] (kv_tile_range);
//   - the KV tiles every row sees whole, which run without mask code: keys [j0, j1] with
//     lo(p_last) <= j0 and j1 <= hi(p_first) and j1 < Sk;
//   - per row, the visible keys clamped to [0, Sk) (row_bounds), for the per-element test of the
//     other tiles (key j of row r visible iff lo_r <= j <= hi_r).
// The types are compile-time policies, so MaskNone and MaskCausal fold to the arithmetic the
// kernel had before masks were general; MaskLocal reads window / chunk sizes at run time.
// kLeftEdge: whether a query tile can have masked KV tiles below its fully visible ones (the kernel
// then compiles a third, masked phase at the end of its KV loop).
// int32 throughout (int64 pairs cost the KV loop registers it does not have): the dispatcher keeps
// lengths and window / chunk sizes at or below 2^30, so p, p +- window and chunk starts stay
// inside (-2^31, 2^31).
#pragma once

#include "cuda/common/fast_divmod.h"

#if defined(__CUDACC__)
#define ATTNKIT_SM90_MASK_HD __host__ __device__ __forceinline__
#else
#define ATTNKIT_SM90_MASK_HD inline
#endif

namespace attnkit::gpu::sm90 {

inline constexpr int kMaskUnbounded = 0x7fff0000;  // beyond any key; only compared, never added

// No mask: every key of the sequence is visible (the sequence's end is still enforced).
struct MaskNone {
  static constexpr bool kLeftEdge = false;
  static constexpr const char* kName = "none";
  ATTNKIT_SM90_MASK_HD int lo(int) const { return -kMaskUnbounded; }
  ATTNKIT_SM90_MASK_HD int hi(int) const { return kMaskUnbounded; }
};

// Causal, bottom-right aligned: key j visible when j <= p.
struct MaskCausal {
  static constexpr bool kLeftEdge = false;
  static constexpr const char* kName = "causal";
  ATTNKIT_SM90_MASK_HD int lo(int) const { return -kMaskUnbounded; }
  ATTNKIT_SM90_MASK_HD int hi(int p) const { return p; }
};

// Sliding window (left, right; -1 = unbounded) intersected with chunks of `chunk` positions (0 =
// none), all at run time: causal, sliding windows, chunked and chunked-causal masks share one
// kernel. Chunks start at multiples of `chunk` with floor division, so a query at p < 0 (Sq > Sk)
// lies in chunk -1 and sees no key.
struct MaskLocal {
  static constexpr bool kLeftEdge = true;
  static constexpr const char* kName = "local";
  int left = -1, right = -1, chunk = 0;

  ATTNKIT_SM90_MASK_HD int chunk_start(int p) const {
    return (p >= 0 ? p / chunk : -((-p + chunk - 1) / chunk)) * chunk;
  }
  ATTNKIT_SM90_MASK_HD int lo(int p) const {
    int l = left >= 0 ? p - left : -kMaskUnbounded;
    if (chunk > 0) {
      const int c = chunk_start(p);
      l = l > c ? l : c;
    }
    return l;
  }
  ATTNKIT_SM90_MASK_HD int hi(int p) const {
    int h = right >= 0 ? p + right : kMaskUnbounded;
    if (chunk > 0) {
      const int c = chunk_start(p) + chunk - 1;
      h = h < c ? h : c;
    }
    return h;
  }
};

// KV tiles of one query tile: [begin, end) hold a visible key for some row (end <= begin: none);
// [full_begin, full_end), inside it, are visible whole to every row and need no mask.
struct KvTileRange {
  int begin, end, full_begin, full_end;
  ATTNKIT_SM90_MASK_HD bool needs_mask(int n) const { return n >= full_end || n < full_begin; }
};

// Visible keys [lo, hi] of one query row, clamped to [0, sk - 1] (hi < lo: none).
struct RowBounds {
  int lo, hi;
};

template <class Mask>
ATTNKIT_SM90_MASK_HD RowBounds row_bounds(const Mask& m, int row, int sq, int sk) {
  const int p = row + sk - sq;
  const int lo = m.lo(p), hi = m.hi(p);
  return {lo < 0 ? 0 : lo, hi > sk - 1 ? sk - 1 : hi};
}

// Rows [m_block * kBlockM, +kBlockM) of a sequence with sq queries and sk keys (rows past sq are
// not computed and do not widen the range), key tiles of kBlockN.
template <int kBlockM, int kBlockN, class Mask>
ATTNKIT_SM90_MASK_HD KvTileRange kv_tile_range(const Mask& m, int m_block, int sq, int sk) {
  const int first = m_block * kBlockM;
  const int last = (first + kBlockM < sq ? first + kBlockM : sq) - 1;
  const RowBounds top = row_bounds(m, first, sq, sk);    // the row that sees the least to the right
  const RowBounds bottom = row_bounds(m, last, sq, sk);  // ... and the least to the left
  KvTileRange r{0, 0, 0, 0};
  if (last < first || bottom.hi < top.lo || bottom.hi < 0 || top.lo > sk - 1) return r;
  r.begin = top.lo / kBlockN;
  r.end = bottom.hi / kBlockN + 1;
  // Whole tiles inside [bottom.lo, top.hi] (top.hi is already clamped below sk).
  int fb = (bottom.lo + kBlockN - 1) / kBlockN;
  int fe = top.hi < bottom.lo ? fb : (top.hi + 1) / kBlockN;
  fb = fb < r.begin ? r.begin : (fb > r.end ? r.end : fb);
  fe = fe < fb ? fb : (fe > r.end ? r.end : fe);
  r.full_begin = fb;
  r.full_end = fe;
  return r;
}

// Split `split` of `num_splits` (split-KV) takes an even share of a query tile's KV tiles, in
// order: with count = end - begin = q·S + rem, splits below rem get q + 1 tiles and the others q,
// so a split past the count gets none. The fully visible tiles stay those of the whole range,
// clamped into the share, so a share needs the mask exactly where the whole range did.
ATTNKIT_SM90_MASK_HD KvTileRange split_kv_range(KvTileRange r, int split, const FastDiv& num_splits) {
  if (num_splits.d <= 1 || r.end <= r.begin) return r;
  int q, rem;
  num_splits.divmod(r.end - r.begin, q, rem);
  const int b = r.begin + q * split + (split < rem ? split : rem);
  const int e = b + q + (split < rem ? 1 : 0);
  r.begin = b;
  r.end = e;
  r.full_begin = r.full_begin < b ? b : (r.full_begin > e ? e : r.full_begin);
  r.full_end = r.full_end < r.full_begin ? r.full_begin : (r.full_end > e ? e : r.full_end);
  return r;
}

}  // namespace attnkit::gpu::sm90

#undef ATTNKIT_SM90_MASK_HD
