// The epilogue of the Hopper prefill kernel's consumers (sm90_fwd_kernel.cuh): O and LSE, or a
// split's fp32 partials, from the P·V accumulators.
#pragma once

#include "cuda/attention/sm90/sm90_fwd_config.cuh"

namespace attnkit::gpu::sm90 {

using namespace cute;

CUTE_DEVICE float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// 4x4 transpose of 4-byte words inside each quad of lanes: lane q holds v[k] = element (q, k)
// before and element (k, q) after. Two exchange rounds (lane q^2, then q^1); the selects route
// by the lane's bits, so no register is indexed at run time.
CUTE_DEVICE void quad_transpose(uint32_t (&v)[4], int q) {
  const bool hi = (q & 2) != 0, odd = (q & 1) != 0;
  // Keep the half of columns {h, h+1} (h = q & 2), trade the other half with lane q^2.
  const uint32_t a0 = hi ? v[2] : v[0], a1 = hi ? v[3] : v[1];
  const uint32_t b0 = __shfl_xor_sync(0xffffffffu, hi ? v[0] : v[2], 2);  // (q^2, h)
  const uint32_t b1 = __shfl_xor_sync(0xffffffffu, hi ? v[1] : v[3], 2);  // (q^2, h+1)
  // Keep column q of both rows, trade column q^1 with lane q^1.
  const uint32_t x0 = odd ? a1 : a0;  // (q, q)
  const uint32_t x2 = odd ? b1 : b0;  // (q^2, q)
  const uint32_t x1 = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 1);  // (q^1, q)
  const uint32_t x3 = __shfl_xor_sync(0xffffffffu, odd ? b0 : b1, 1);  // (q^3, q)
  // x[i] = element (q^i, q); element (k, q) is x[k^q].
  const uint32_t y0 = odd ? x1 : x0, y1 = odd ? x0 : x1, y2 = odd ? x3 : x2, y3 = odd ? x2 : x3;
  v[0] = hi ? y2 : y0;
  v[1] = hi ? y3 : y1;
  v[2] = hi ? y0 : y2;
  v[3] = hi ? y1 : y3;
}

template <class Element>
CUTE_DEVICE uint32_t pack2(float a, float b) {
  cutlass::NumericArrayConverter<Element, float, 2> cvt;
  cutlass::Array<float, 2> v;
  v[0] = a;
  v[1] = b;
  const cutlass::Array<Element, 2> h = cvt(v);
  return reinterpret_cast<const uint32_t&>(h);
}

// The epilogue of one work tile, run by every consumer thread on its two rows: O normalised (the
// sink folded in) with its LSE, or, for a split, the fp32 partial and natural-log LSE that the
// combine reads. O and cOrc are the (row, col) views of the P·V accumulator and of its
// coordinates in the tile; head and split are the work tile's; si its sequence's lengths.
template <class Cfg, class Sinks, class Params, class TensorO, class TensorC>
CUTE_DEVICE void store_tile(const Params& p, const TensorO& O, const TensorC& cOrc,
                            const float (&row_max)[2], const float (&row_sum)[2], float scale_log2,
                            const SeqInfo& si, int row0, int head, int split, int tidx) {
  using Element = typename Cfg::Element;
  constexpr int kDv = Cfg::kHeadDimV, kRows = 2;
  const int64_t o_base = si.q_batch * p.o_batch + int64_t{si.q_offset} * p.o_row + head * p.o_head;
  const float kLn2 = 0.69314718055994530942f;
  const bool split_out = p.part_o != nullptr;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    float sum = quad_sum(row_sum[r]);
    const bool empty = !(sum > 0.f);  // no visible key: O = 0, LSE = -inf (sink or not)
    float inv = empty ? 0.f : 1.f / sum;
    float lse_log2 = row_max[r] * scale_log2 + __log2f(sum);
    if constexpr (Sinks::kEnabled) {
      // The sink joins the denominator in the frame of the larger of it and the row max. A
      // split's partial leaves it out: the combine adds it once, as one more state.
      if (!empty && !split_out) {
        const float m = row_max[r] * scale_log2;
        const float s = Sinks{p.sinks, p.sinks_stride}.log2_sink(head);
        const float mf = fmaxf(m, s);
        const float c = exp2f(m - mf);
        const float denom = sum * c + exp2f(s - mf);
        inv = c / denom;
        lse_log2 = mf + __log2f(denom);
      }
    }
    const int row = row0 + get<0>(cOrc(r, 0));
    const bool row_ok = row < si.sq;  // the same for the four lanes of a quad
    const int q = tidx % 4;
    if (split_out) {
      // fp32 partial: each lane stores its column pairs as 8-byte words, so a quad fills the
      // 32 bytes of each n8 block. An empty row (or split) writes O = 0 and LSE = -inf.
      const int64_t prow = int64_t{split} * p.part_rows +
                           int64_t{si.q_batch} * p.seqs.q_rows + si.q_offset + row;
      float* po = p.part_o + (prow * p.hq + head) * kDv;
      if (row_ok) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(O); c += 2)
          *reinterpret_cast<float2*>(po + get<1>(cOrc(r, c))) =
              make_float2(O(r, c) * inv, O(r, c + 1) * inv);
        if (q == 0) p.part_lse[prow * p.hq + head] = empty ? -INFINITY : lse_log2 * kLn2;
      }
      continue;
    }
    // A quad holds 8 columns of each n8 block of its row, 4 bytes per lane; after a transpose
    // of four blocks inside the quad each lane stores one block's 16 contiguous bytes, so a
    // warp's store fills whole 32-byte sectors (4-byte stores filled half of each). The
    // shuffles run on every lane; only the stores are skipped past Sq.
    Element* out = p.o + o_base + int64_t{row} * p.o_row;
    static_assert(decltype(size<1>(O))::value % 8 == 0, "O's columns come in groups of four n8 blocks");
    CUTE_UNROLL
    for (int g = 0; g < size<1>(O) / 8; ++g) {
      uint32_t v[4];
      CUTE_UNROLL
      for (int k = 0; k < 4; ++k)
        v[k] = pack2<Element>(O(r, 8 * g + 2 * k) * inv, O(r, 8 * g + 2 * k + 1) * inv);
      quad_transpose(v, q);
      // This lane's pair of block 4g sits at column 32g + 2q; block 4g + q starts 6q later.
      const int col = get<1>(cOrc(r, 8 * g)) + 6 * q;
      if (row_ok) *reinterpret_cast<uint4*>(out + col) = make_uint4(v[0], v[1], v[2], v[3]);
    }
    if (row_ok && p.lse != nullptr && q == 0) {
      const float lse = empty ? -INFINITY : lse_log2 * kLn2;
      p.lse[si.q_batch * p.lse_batch + int64_t{si.q_offset + row} * p.lse_row +
            head * p.lse_head] = lse;
    }
  }
}

}  // namespace attnkit::gpu::sm90
