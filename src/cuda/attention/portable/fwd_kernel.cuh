// The portable (sm_80+) attention kernel: FlashAttention-2 structure on mma.sync + cp.async.
//
// One CTA = kWarps warps = one tile of kBlockM query rows for one KV head of one sequence, and one
// split of its key range. The tile's rows are (query token, query head of the GQA group) pairs,
// row r = token * group + head_in_group, so decode (a handful of tokens) still fills the M
// dimension with the group's heads, and prefill loads each K/V tile once for the whole group.
// Each warp owns 16 * kMT rows; K/V tiles of kBlockN keys go global -> shared through a kStages-deep
// cp.async pipeline, fragments come from shared memory via ldmatrix, S = Q K^T and O += P V run on
// m16n8k16 MMAs with fp32 accumulators, and the softmax is online in log2 units (scale folded into
// the score mod).
//
// Split-KV (num_splits > 1): split s (grid y / kv_heads) handles the s-th slice of the tile's
// key blocks and writes a normalised fp32 partial O and its natural-log LSE; combine_kernel.cuh
// merges them (and adds the sinks). Without splits the epilogue adds the sinks and writes O / LSE.
//
// Rows with no visible key: O = 0 and LSE = -inf, with or without a sink.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention/policy/mask.cuh"
#include "cuda/attention/policy/score_mod.cuh"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// kMT_: 16-row MMA tiles per warp. Two let each K/V fragment read from shared memory feed two
// MMAs (prefill, where shared-memory bandwidth limits mma.sync).
// kSplitN_ (decode): one 16-row tile per CTA, the 4 warps split each key tile (16+ keys each) and
// merge their partial softmax states through shared memory at the end, so that every SM
// sub-partition's tensor core works and the K/V pipeline can be deeper.
template <int kDqk_, int kDv_, int kMT_ = 1, bool kSplitN_ = false>
struct FwdTile {
  static constexpr int kDqk = kDqk_, kDv = kDv_, kMT = kMT_;
  static constexpr bool kSplitN = kSplitN_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16 * kMT;
  static constexpr int kBlockM = kSplitN ? kWarpRows : kWarps * kWarpRows;
  static constexpr int kBlockN = kSplitN ? 64 : (kDqk <= 128 && kDv <= 128) ? 64 : 32;
  static constexpr int kWarpN = kSplitN ? kBlockN / kWarps : kBlockN;  // keys per warp per tile
  static constexpr int kStages = (kSplitN && kDqk <= 128 && kDv <= 128) ? 3 : 2;
  static_assert(!kSplitN || kMT == 1, "split-N tiles have one 16-row tile");
  // Q fragments stay in registers when they fit beside the O accumulators; larger heads re-read
  // them from shared memory for every K tile.
  static constexpr bool kQInRegs = kDqk <= 128 && kMT == 1;
  // Rows padded by 16 bytes: the 8 rows an ldmatrix reads then fall in distinct banks.
  static constexpr int kQStride = kDqk + 8, kKStride = kDqk + 8, kVStride = kDv + 8;
  static constexpr int kSmemElems =
      kBlockM * kQStride + kStages * kBlockN * (kKStride + kVStride);
  static constexpr int kSmemBytes = kSmemElems * 2;
  // The split-N merge reuses the K/V stages: fp32 O, m and l per warp.
  static_assert(!kSplitN || kWarps * 16 * (kDv + 2) * 4 <= kStages * kBlockN * (kKStride + kVStride) * 2,
                "split-N merge buffer must fit in the K/V stages");
  static_assert(kDqk % 16 == 0 && kDv % 16 == 0, "head dims must be multiples of 16");
};

// Per-row facts a thread needs for its two rows (g and g + 8 of its warp's 16).
struct RowInfo {
  int token;   // query index within the sequence
  int head;    // query head
  int p;       // bottom-right aligned position: token + Sk - Sq
  int lo, hi;  // visible keys [lo, hi], clamped to the sequence (lo > hi: none)
  bool valid;  // inside the sequence's rows (padding rows compute but never store)
};

// Stores one row's result: O (or the fp32 partial), LSE, with the sink folded in and the
// no-visible-key rule. `l` is the full denominator of the row's keys, `m` its max (log2 units).
template <int kDv, typename T, class Get>
__device__ __forceinline__ void store_row_cols(const FwdParams& p, float m, float l, int b, int token,
                                               int head, int q_start, int split, int col0,
                                               int col_step, int n_cols, Get&& get) {
  const bool partial = p.num_splits > 1;
  float o_scale, lse;
  if (l == 0.f) {  // no visible key (a sink alone does not count): O = 0, LSE = -inf
    o_scale = 0.f;
    lse = -INFINITY;
  } else if (!partial && p.sinks != nullptr) {
    const float s2 = __ldg(p.sinks + head * p.sinks_stride) * kLog2e;
    const float m_fin = fmaxf(m, s2);
    const float keep = exp2f(m - m_fin);
    l = l * keep + exp2f(s2 - m_fin);
    o_scale = keep / l;
    lse = (m_fin + log2f(l)) * kLn2;
  } else {
    o_scale = 1.f / l;
    lse = (m + log2f(l)) * kLn2;
  }
  if (partial) {
    const int64_t flat = p.cu_seqlens_q != nullptr ? int64_t{q_start} + token
                                                   : int64_t{b} * p.q_rows + token;
    const int64_t idx = (int64_t{split} * p.part_rows + flat) * p.hq + head;
    float* dst = p.part_o + idx * kDv;
    for (int c = col0, k = 0; k < n_cols; c += col_step, ++k) dst[c] = get(k) * o_scale;
    if (col0 == 0) p.part_lse[idx] = lse;
  } else {
    T* dst = static_cast<T*>(p.o) + b * p.o_batch_stride + int64_t{q_start + token} * p.o_row_stride +
             int64_t{head} * p.o_head_stride;
    for (int c = col0, k = 0; k < n_cols; c += col_step, ++k) dst[c] = from_float<T>(get(k) * o_scale);
    if (p.lse != nullptr && col0 == 0)
      p.lse[b * p.lse_batch_stride + int64_t{q_start + token} * p.lse_row_stride +
            int64_t{head} * p.lse_head_stride] = lse;
  }
}

// Split-N merge: every warp holds (m, l, O) of the same 16 rows over its share of the keys. They
// go through shared memory (the K/V stages, free after the main loop) and each thread then
// finishes whole rows' column slices.
template <class Tile, typename T>
__device__ __forceinline__ void split_n_epilogue(const FwdParams& p, float* red,
                                                 const float (&acc)[Tile::kDv / 8][4],
                                                 const float (&m_run)[2], const float (&l_run)[2],
                                                 int m0, int rows_total, int b, int hk, int q_start,
                                                 int split) {
  constexpr int kDv = Tile::kDv, kW = Tile::kWarps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* red_o = red;                       // [kW][16][kDv]
  float* red_m = red + kW * 16 * kDv;       // [kW][16]
  float* red_l = red_m + kW * 16;           // [kW][16]
  __syncthreads();  // every warp is done with the K/V stages
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int rr = lane / 4 + i * 8;
    if (lane % 4 == 0) {
      red_m[warp * 16 + rr] = m_run[i];
      red_l[warp * 16 + rr] = l;
    }
#pragma unroll
    for (int n = 0; n < kDv / 8; ++n) {
      const int c = n * 8 + (lane % 4) * 2;
      red_o[(warp * 16 + rr) * kDv + c] = acc[n][2 * i];
      red_o[(warp * 16 + rr) * kDv + c + 1] = acc[n][2 * i + 1];
    }
  }
  __syncthreads();
  // 8 threads per row (16 rows x 8 = 128 threads), each a strided slice of the columns.
  const int rr = threadIdx.x / 8, c0 = threadIdx.x % 8;
  const int r = m0 + rr;
  if (r >= rows_total) return;
  int tok, hg;
  p.group.divmod(r, tok, hg);
  float m = -INFINITY;
#pragma unroll
  for (int w = 0; w < kW; ++w) m = fmaxf(m, red_m[w * 16 + rr]);
  const float m_use = m == -INFINITY ? 0.f : m;
  float wgt[kW], l = 0.f;
#pragma unroll
  for (int w = 0; w < kW; ++w) {
    wgt[w] = exp2f(red_m[w * 16 + rr] - m_use);
    l += red_l[w * 16 + rr] * wgt[w];
  }
  auto get = [&](int k) {
    const int c = c0 + k * 8;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kW; ++w) o += red_o[(w * 16 + rr) * kDv + c] * wgt[w];
    return o;
  };
  store_row_cols<kDv, T>(p, m, l, b, tok, hk * p.group.d + hg, q_start, split, c0, 8, kDv / 8, get);
}

template <class Tile, typename T, class Mask, class Mod>
__global__ void __launch_bounds__(Tile::kThreads)
    portable_fwd_kernel(const __grid_constant__ FwdParams p) {
  constexpr int kDqk = Tile::kDqk, kDv = Tile::kDv;
  constexpr int kBlockM = Tile::kBlockM, kBlockN = Tile::kBlockN, kStages = Tile::kStages;
  constexpr int kThreads = Tile::kThreads;
  constexpr int kMT = Tile::kMT, kR = 2 * kMT;  // kR rows per thread
  constexpr int kWarpN = Tile::kWarpN;
  constexpr bool kSplitN = Tile::kSplitN;
  constexpr int kQS = Tile::kQStride, kKS = Tile::kKStride, kVS = Tile::kVStride;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * kQS;
  T* sV = sK + kStages * kBlockN * kKS;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // First row of this warp's rows within the tile; first key of its keys within each key tile.
  const int warp_row0 = kSplitN ? 0 : warp * Tile::kWarpRows;
  const int warp_key0 = kSplitN ? warp * kWarpN : 0;
  const int m_block = gridDim.x - 1 - blockIdx.x;  // longest (causal) tiles first
  // grid: x = row tiles, y = (split, kv head), z = sequence
  const int hk = blockIdx.y % p.hkv, split = blockIdx.y / p.hkv;
  const int b = blockIdx.z;
  const int G = p.group.d;

  const QSeq qs = q_sequence(p, b);
  const int q_start = qs.start, sq = qs.length;
  const int rows_total = sq * G;
  const int m0 = m_block * kBlockM;
  if (m0 >= rows_total) return;
  const KvOperand::Seq kvs = p.kv.sequence(b);
  const int sk = kvs.length;

  const Mask mask(p);
  const Mod mod(p);

  // ---- the key blocks this CTA visits
  const int t_min = p.group.div(m0);
  const int t_max = p.group.div(min(m0 + kBlockM, rows_total) - 1);
  const int64_t p_min = int64_t{t_min} + sk - sq, p_max = int64_t{t_max} + sk - sq;
  const int64_t key_lo = max(mask.lo(p_min), int64_t{0});
  const int64_t key_hi = min(mask.hi(p_max), int64_t{sk} - 1);
  int n_begin = 0, n_end = 0;
  if (key_hi >= key_lo) {
    n_begin = static_cast<int>(key_lo / kBlockN);
    n_end = static_cast<int>(key_hi / kBlockN) + 1;
  }
  if (p.num_splits > 1) {
    const int per = (n_end - n_begin + p.num_splits - 1) / p.num_splits;
    const int s_begin = min(n_begin + split * per, n_end);
    n_end = min(s_begin + per, n_end);
    n_begin = s_begin;
  }
  const int n_tiles = n_end - n_begin;
  // Tiles inside [full_lo, full_hi] need no per-element mask (every row sees every key).
  const int64_t full_lo = mask.lo(p_max);
  const int64_t full_hi = min(mask.hi(p_min), int64_t{sk} - 1);

  // ---- this thread's rows: g and g + 8 of each of its warp's 16-row tiles
  RowInfo rows[kR];
  typename Mod::Row mrow[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int r = m0 + warp_row0 + (i / 2) * 16 + lane / 4 + (i % 2) * 8;
    int tok, hg;
    p.group.divmod(r, tok, hg);
    RowInfo& ri = rows[i];
    ri.valid = r < rows_total;
    ri.token = tok;
    ri.head = hk * G + hg;
    ri.p = tok + sk - sq;
    ri.lo = static_cast<int>(max(mask.lo(ri.p), int64_t{0}));
    ri.hi = static_cast<int>(min(mask.hi(ri.p), int64_t{sk} - 1));
    mrow[i] = mod.row(p, ri.valid ? ri.head : hk * G);
  }

  // ---- global -> shared copies
  const T* gQ = static_cast<const T*>(p.q);
  const T* gK = static_cast<const T*>(p.kv.k);
  const T* gV = static_cast<const T*>(p.kv.v);
  {
    constexpr int kChunks = kDqk / 8;
#pragma unroll
    for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
      const int row = c / kChunks, col = (c % kChunks) * 8;
      const int r = m0 + row;
      int tok, hg;
      p.group.divmod(r, tok, hg);
      const bool ok = r < rows_total;
      const T* src = ok ? gQ + b * p.q_batch_stride + int64_t{q_start + tok} * p.q_row_stride +
                              int64_t{hk * G + hg} * p.q_head_stride + col
                        : gQ;
      cp_async_16(smem_addr(sQ + row * kQS + col), src, ok);
    }
  }
  auto load_kv = [&](int n_block, int stage) {
    const int j0 = n_block * kBlockN;
    T* dK = sK + stage * kBlockN * kKS;
    T* dV = sV + stage * kBlockN * kVS;
    constexpr int kKC = kDqk / 8, kVC = kDv / 8;
#pragma unroll
    for (int c = tid; c < kBlockN * kKC; c += kThreads) {
      const int row = c / kKC, col = (c % kKC) * 8;
      const int j = j0 + row;
      const bool ok = j < sk;
      int64_t outer = 0;
      int r = 0;
      if (ok) p.kv.locate(b, kvs.start, j, outer, r);
      const T* src = ok ? gK + p.kv.k_offset(outer, r, hk) + col : gK;
      cp_async_16(smem_addr(dK + row * kKS + col), src, ok);
    }
#pragma unroll
    for (int c = tid; c < kBlockN * kVC; c += kThreads) {
      const int row = c / kVC, col = (c % kVC) * 8;
      const int j = j0 + row;
      const bool ok = j < sk;
      int64_t outer = 0;
      int r = 0;
      if (ok) p.kv.locate(b, kvs.start, j, outer, r);
      const T* src = ok ? gV + p.kv.v_offset(outer, r, hk) + col : gV;
      cp_async_16(smem_addr(dV + row * kVS + col), src, ok);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) load_kv(n_begin + s, s);
    cp_async_commit();  // group 0 also carries Q
  }

  float acc[kMT][kDv / 8][4];
  float m_run[kR], l_run[kR];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < kDv / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][n][e] = 0.f;
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    m_run[i] = -INFINITY;
    l_run[i] = 0.f;
  }

  // ldmatrix lane addressing: matrix mi = lane / 8, row-in-matrix lane % 8.
  const int mi = lane / 8, mr = lane % 8;
  // A operand (16 x 16 at rows r0, cols c0): matrices (r0, c0) (r0+8, c0) (r0, c0+8) (r0+8, c0+8).
  const uint32_t q_lane =
      smem_addr(sQ + (warp_row0 + (mi & 1) * 8 + mr) * kQS + (mi >> 1) * 8);
  // K as B (n x k stored row-major): matrices (n0, k0) (n0, k0+8) (n0+8, k0) (n0+8, k0+8).
  const int k_lane_off = ((mi >> 1) * 8 + mr) * kKS + (mi & 1) * 8;
  // V as B via .trans (k x n stored row-major): (k0, n0) (k0+8, n0) (k0, n0+8) (k0+8, n0+8).
  const int v_lane_off = ((mi & 1) * 8 + mr) * kVS + (mi >> 1) * 8;

  const bool warp_active = m0 + warp_row0 < rows_total;
  constexpr int kQFrags = Tile::kQInRegs ? kDqk / 16 : 1;
  uint32_t qf[kQFrags][4];

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    // The stage refilled here was last read in iteration t - 1, which every thread has left.
    if (t + kStages - 1 < n_tiles) load_kv(n_begin + t + kStages - 1, (t + kStages - 1) % kStages);
    cp_async_commit();
    if constexpr (Tile::kQInRegs) {
      if (t == 0) {
#pragma unroll
        for (int kk = 0; kk < kDqk / 16; ++kk) ldmatrix_x4(q_lane + kk * 32, qf[kk]);
      }
    }
    // Warps whose rows are all padding (decode: a few tokens x the GQA group) only help load.
    if (!warp_active) continue;
    const int stage = t % kStages;
    const uint32_t k_base = smem_addr(sK + (stage * kBlockN + warp_key0) * kKS + k_lane_off);
    const uint32_t v_base = smem_addr(sV + (stage * kBlockN + warp_key0) * kVS + v_lane_off);

    // ---- S = Q K^T
    float s[kMT][kWarpN / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kWarpN / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kDqk / 16; ++kk) {
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Tile::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = qf[kk][e];
        } else {
          ldmatrix_x4(q_lane + (mt * 16 * kQS + kk * 16) * 2, a[mt]);
        }
      }
#pragma unroll
      for (int nn = 0; nn < kWarpN / 16; ++nn) {
        uint32_t bk[4];
        ldmatrix_x4(k_base + (nn * 16 * kKS + kk * 16) * 2, bk);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          MmaOp<T>::run(s[mt][2 * nn], a[mt], bk[0], bk[1]);
          MmaOp<T>::run(s[mt][2 * nn + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // ---- score mod, mask, online softmax (log2 units)
    const int j0 = (n_begin + t) * kBlockN;
    const bool full = full_lo <= j0 && j0 + kBlockN - 1 <= full_hi;
    const int jl = j0 + warp_key0 + (lane % 4) * 2;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kWarpN / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = mt * 2 + (e >> 1);
          const int j = jl + n * 8 + (e & 1);
          float x = mod.apply(s[mt][n][e], mrow[i], rows[i].p, j);
          if (!full && (j < rows[i].lo || j > rows[i].hi)) x = -INFINITY;
          s[mt][n][e] = x;
        }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int mt = i / 2, h = i % 2;
      float mx = m_run[i];
#pragma unroll
      for (int n = 0; n < kWarpN / 8; ++n)
        mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_use = mx == -INFINITY ? 0.f : mx;
      const float alpha = exp2f(m_run[i] - m_use);
      m_run[i] = mx;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kWarpN / 8; ++n) {
        s[mt][n][2 * h] = exp2f(s[mt][n][2 * h] - m_use);
        s[mt][n][2 * h + 1] = exp2f(s[mt][n][2 * h + 1] - m_use);
        sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
      }
      l_run[i] = l_run[i] * alpha + sum;
#pragma unroll
      for (int n = 0; n < kDv / 8; ++n) {
        acc[mt][n][2 * h] *= alpha;
        acc[mt][n][2 * h + 1] *= alpha;
      }
    }

    // ---- O += P V (P re-packed from the S accumulators as the A operand)
#pragma unroll
    for (int kk = 0; kk < kWarpN / 16; ++kk) {
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int nn = 0; nn < kDv / 16; ++nn) {
        uint32_t bv[4];
        ldmatrix_x4_trans(v_base + (kk * 16 * kVS + nn * 16) * 2, bv);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          MmaOp<T>::run(acc[mt][2 * nn], a[mt], bv[0], bv[1]);
          MmaOp<T>::run(acc[mt][2 * nn + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // nothing may still be landing in shared memory at exit

  if constexpr (kSplitN) {
    split_n_epilogue<Tile, T>(p, reinterpret_cast<float*>(sK), acc[0], m_run, l_run, m0,
                              rows_total, b, hk, q_start, split);
  } else {
    // ---- epilogue
    const bool partial = p.num_splits > 1;
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int mt = i / 2, h = i % 2;
      float l = l_run[i];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const RowInfo& ri = rows[i];
      float m = m_run[i];
      float o_scale, lse;
      if (l == 0.f) {  // no visible key (a sink alone does not count): O = 0, LSE = -inf
        o_scale = 0.f;
        lse = -INFINITY;
      } else if (!partial && p.sinks != nullptr && ri.valid) {
        const float s2 = __ldg(p.sinks + ri.head * p.sinks_stride) * kLog2e;
        const float m_fin = fmaxf(m, s2);
        l = l * exp2f(m - m_fin) + exp2f(s2 - m_fin);
        o_scale = exp2f(m - m_fin) / l;
        lse = (m_fin + log2f(l)) * kLn2;
      } else {
        o_scale = 1.f / l;
        lse = (m + log2f(l)) * kLn2;
      }
      if (!ri.valid) continue;
      const int col = (lane % 4) * 2;
      if (partial) {
        const int64_t flat = p.cu_seqlens_q != nullptr ? int64_t{q_start} + ri.token
                                                       : int64_t{b} * p.q_rows + ri.token;
        const int64_t idx = (int64_t{split} * p.part_rows + flat) * p.hq + ri.head;
        float* dst = p.part_o + idx * kDv + col;
#pragma unroll
        for (int n = 0; n < kDv / 8; ++n)
          *reinterpret_cast<float2*>(dst + n * 8) =
              make_float2(acc[mt][n][2 * h] * o_scale, acc[mt][n][2 * h + 1] * o_scale);
        if (lane % 4 == 0) p.part_lse[idx] = lse;
      } else {
        T* dst = static_cast<T*>(p.o) + b * p.o_batch_stride +
                 int64_t{q_start + ri.token} * p.o_row_stride + int64_t{ri.head} * p.o_head_stride +
                 col;
#pragma unroll
        for (int n = 0; n < kDv / 8; ++n)
          *reinterpret_cast<uint32_t*>(dst + n * 8) =
              pack2<T>(acc[mt][n][2 * h] * o_scale, acc[mt][n][2 * h + 1] * o_scale);
        if (p.lse != nullptr && lane % 4 == 0)
          p.lse[b * p.lse_batch_stride + int64_t{q_start + ri.token} * p.lse_row_stride +
                int64_t{ri.head} * p.lse_head_stride] = lse;
      }
    }
  }
}

}  // namespace attnkit::gpu
