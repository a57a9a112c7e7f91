// The portable (sm_80+) prefill kernel: FlashAttention-2 structure on mma.sync, cp.async, ldmatrix.
//
// One CTA = kWarps warps = one tile of kBlockM query rows for one KV head of one sequence (and one
// split of its key range). Rows are (query token, query head of the GQA group) pairs, row = token *
// group + head_in_group, so each K/V tile is loaded once for the whole group. Each warp owns kMT
// consecutive 16-row MMA tiles (in warp pairs, both warps own the same rows and split the keys of
// S and the columns of O between them). K/V tiles of kBlockN keys go global -> shared through cp.async (a
// ring of kStages K/V buffers, or one K and one V buffer refilled in turn); S = Q K^T and O += P V
// run on m16n8k16 MMAs with fp32 accumulators; P goes from the S accumulators to the A operand in
// registers; the softmax is online in log2 units.
//
// What keeps the instruction count near the MMA count (mma.sync leaves few issue slots spare):
//   - K/V copies are fully unrolled, with addresses from a per-sequence base and a row stride
//     (paged KV looks each row's page up instead);
//   - a plain scaled dot product (NoScoreMod, positive scale: the dispatcher sends others to the
//     generic variant) takes the row max on the raw scores and folds the scale into the exp2
//     argument, one FFMA per score;
//   - O and l are rescaled only when some row's running max moved, and (lazy rescale) the max
//     moves only when it grew by more than 2^8: P values stay <= 2^8, exact enough in bf16/fp16
//     and fp32 sums, and the rescale (one FMUL per O element) drops out of almost every tile;
//   - key tiles that every row sees entirely skip the mask; a warp skips the key tiles past the
//     last one its rows see (causal diagonal tiles);
//   - O is staged through shared memory (the warp's own Q rows, dead by then) and written with
//     16-byte stores;
//   - with one query head per KV head (no GQA packing), O rows are addressed from one base and
//     the row stride, without a division per 16-byte piece. (The same for the Q copy doubled
//     ptxas's spill traffic inside the d128 key loop, so Q keeps the general path.)
//
// Split-KV (num_splits > 1): split s handles the s-th slice of the tile's key blocks and writes a
// normalised fp32 partial O and its natural-log LSE; combine_kernel.cuh merges them and adds the
// sinks. Rows with no visible key: O = 0 and LSE = -inf, with or without a sink.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/policy/mask.cuh"
#include "cuda/attention/policy/score_mod.cuh"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

template <int kDqk_, int kDv_, int kBlockM_, int kBlockN_, int kStages_, bool kQInRegs_,
          int kWarps_ = 4, bool kPairs_ = false, bool kLazyRescale_ = true>
struct PrefillTile {
  static constexpr int kDqk = kDqk_, kDv = kDv_, kBlockM = kBlockM_, kBlockN = kBlockN_;
  // kStages >= 2: K/V tiles in a ring of kStages buffers, tile t + kStages - 1 loading while tile
  // t is used. kStages == 1: one K and one V buffer, refilled in turn (V(t) loads during Q K(t)^T,
  // K(t+1) during the softmax and P V(t)): the least shared memory, so two CTAs per SM still fit
  // 64-key tiles at head dim 256.
  static constexpr int kStages = kStages_;
  static constexpr int kWarps = kWarps_, kThreads = kWarps * 32;
  // Warp pairs (kPairs): the two warps of a pair own the same rows; warp h of the pair computes
  // the scores of key half h and the O columns of Dv half h. Each warp then holds twice the rows
  // for the same registers, which halves the K and V shared-memory reads per MMA (at head dim
  // 256, where a warp otherwise holds 16 rows, those reads outweigh the tensor time). The pair
  // swaps its row maxima and its P halves through shared memory.
  static constexpr bool kPairs = kPairs_;
  static constexpr int kPairSize = kPairs ? 2 : 1;
  static constexpr int kRowGroups = kWarps / kPairSize;  // warps (or pairs) with distinct rows
  static constexpr int kWarpRows = kBlockM / kRowGroups;
  static constexpr int kMT = kWarpRows / 16;  // 16-row MMA tiles per warp
  static constexpr int kWarpKeys = kBlockN / kPairSize;  // score columns a warp computes
  static constexpr int kWarpDv = kDv / kPairSize;        // O columns a warp accumulates
  // O's rescale is skipped while no row's running max grew by more than 2^8 (P values up to 2^8
  // are exact enough in bf16/fp16 and fp32 sums); the max kept is the one the sums use.
  static constexpr bool kLazyRescale = kLazyRescale_;
  // Q fragments held in registers for the whole key loop, where they fit beside S and O.
  static constexpr bool kQInRegs = kQInRegs_;
  // Rows padded by 16 bytes: the 8 rows an ldmatrix reads then fall in distinct banks.
  static constexpr int kQStride = kDqk + 8, kKStride = kDqk + 8, kVStride = kDv + 8;
  static constexpr int kOStride = kDv + 8;  // O staging, in the Q rows
  static constexpr int kPStride = kBlockN + 8;  // pairs: P rows swapped through shared memory
  // Q, the K/V stages, the pairs' P rows and row maxima, then each row's visible-key bounds
  // [lo, hi] (int32).
  static constexpr int kPOffset =
      2 * (kBlockM * kQStride + kStages * kBlockN * (kKStride + kVStride));
  static constexpr int kRedOffset = kPOffset + (kPairs ? 2 * kBlockM * kPStride : 0);
  static constexpr int kBoundsOffset = kRedOffset + (kPairs ? 4 * kWarps * kWarpRows : 0);
  static constexpr int kSmemBytes = kBoundsOffset + kBlockM * 2 * 4;
  static_assert(kWarpRows % 16 == 0 && kWarpKeys % 16 == 0, "tiles are made of 16x16 MMA blocks");
  static_assert(kDqk % 16 == 0 && kWarpDv % 16 == 0, "head dims must be multiples of 16");
  static_assert(kDv <= kDqk, "O is staged in the Q rows");
  static_assert(kStages >= 1, "at least one K and one V buffer");
  static_assert(!kPairs || (kWarps % 2 == 0 && kRowGroups <= 15), "pairs: named barriers 1..15");
};

// Copies a [kRows x kCols] tile of 16-bit elements global -> shared (row stride kStride elements)
// in 16-byte pieces, fully unrolled. row_src(row) gives the row's global start, or nullptr for
// rows past the end (zero-filled, so that 0 * garbage never makes a NaN).
template <int kRows, int kCols, int kStride, int kThreads, typename T, class RowSrc>
__device__ __forceinline__ void copy_tile_async(T* dst, const T* any_valid, int tid,
                                                RowSrc&& row_src) {
  constexpr int kPerRow = kCols / 8;
  constexpr int kTotal = kRows * kPerRow;
  static_assert(kTotal % kThreads == 0, "every thread copies the same number of pieces");
#pragma unroll
  for (int i = 0; i < kTotal / kThreads; ++i) {
    int row, col;
    if constexpr (kThreads % kPerRow == 0) {  // a thread keeps its column, rows step evenly
      row = tid / kPerRow + i * (kThreads / kPerRow);
      col = (tid % kPerRow) * 8;
    } else {
      const int c = tid + i * kThreads;
      row = c / kPerRow;
      col = (c % kPerRow) * 8;
    }
    const T* src = row_src(row);
    cp_async_16(smem_addr(dst + row * kStride + col), src != nullptr ? src + col : any_valid,
                src != nullptr);
  }
}

// The same for a row-strided tile (row r at base + r * stride) whose rows >= valid_rows are
// zero-filled: where the threads split the rows evenly, each walks its rows with one pointer, so a
// piece costs a compare, a select and an add besides the copy.
template <int kRows, int kCols, int kStride, int kThreads, typename T>
__device__ __forceinline__ void copy_rows_async(T* dst, const T* base, int64_t stride,
                                                int valid_rows, int tid) {
  constexpr int kPerRow = kCols / 8;
  if constexpr (kThreads % kPerRow == 0) {
    constexpr int kRowStep = kThreads / kPerRow;
    static_assert(kRows % kRowStep == 0, "every thread copies the same number of pieces");
    const int r0 = tid / kPerRow, col = (tid % kPerRow) * 8;
    const T* src = base + r0 * stride + col;
    const int64_t step = kRowStep * stride;
    const uint32_t d = smem_addr(dst + r0 * kStride + col);
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i) {
      const bool ok = r0 + i * kRowStep < valid_rows;
      cp_async_16(d + i * kRowStep * kStride * 2, ok ? src : base, ok);
      src += step;
    }
  } else {
    copy_tile_async<kRows, kCols, kStride, kThreads>(dst, base, tid, [&](int row) -> const T* {
      return row < valid_rows ? base + row * stride : nullptr;
    });
  }
}

template <class Tile, typename T, class Mask, class Mod>
__global__ void __launch_bounds__(Tile::kThreads)
    portable_prefill_kernel(const __grid_constant__ FwdParams p) {
  constexpr int kDqk = Tile::kDqk, kDv = Tile::kDv;
  constexpr int kBlockM = Tile::kBlockM, kBlockN = Tile::kBlockN, kStages = Tile::kStages;
  constexpr int kThreads = Tile::kThreads, kMT = Tile::kMT, kR = 2 * kMT;  // kR rows per thread
  constexpr int kQS = Tile::kQStride, kKS = Tile::kKStride, kVS = Tile::kVStride;
  constexpr int kOS = Tile::kOStride, kPS = Tile::kPStride;
  constexpr int kWarpKeys = Tile::kWarpKeys, kWarpDv = Tile::kWarpDv;
  constexpr bool kPairs = Tile::kPairs;
  // A plain scaled dot product: the scale is folded into the exp2 argument.
  constexpr bool kLinear = std::is_same_v<Mod, NoScoreMod>;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * kQS;
  T* sV = sK + kStages * kBlockN * kKS;
  T* sP = reinterpret_cast<T*>(smem_raw + Tile::kPOffset);          // pairs only
  float* s_red = reinterpret_cast<float*>(smem_raw + Tile::kRedOffset);  // pairs only
  int2* s_bounds = reinterpret_cast<int2*>(smem_raw + Tile::kBoundsOffset);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = warp / Tile::kPairSize;      // the warp (or pair) whose rows these are
  const int half = kPairs ? warp % 2 : 0;        // pairs: this warp's key and Dv half
  const int warp_row0 = group * Tile::kWarpRows;
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
  // Key tiles [full_begin, full_end) need no per-element mask: every row sees every key. (Kept as
  // two tile indices rather than int64 key bounds, to spare registers.)
  int full_begin, full_end;
  {
    const int64_t full_lo = max(mask.lo(p_max), int64_t{0});
    const int64_t full_hi = min(mask.hi(p_min), int64_t{sk} - 1);
    full_begin = static_cast<int>(min((full_lo + kBlockN - 1) / kBlockN, int64_t{n_end}));
    full_end = full_hi >= 0 ? static_cast<int>(min((full_hi + 1) / kBlockN, int64_t{n_end})) : 0;
  }

  // ---- this thread's rows: g and g + 8 of each of its warp's 16-row tiles (row_of(i), i < kR).
  // Each row's visible keys [lo, hi] (clamped to the sequence) go to shared memory for the few
  // tiles that need the mask; registers hold only the mod's per-row state (the ALiBi slope), which
  // keeps S and O clear of spills.
  auto row_of = [&](int i) { return m0 + warp_row0 + (i / 2) * 16 + lane / 4 + (i % 2) * 8; };
  typename Mod::Row mrow[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int r = row_of(i);
    int tok, hg;
    p.group.divmod(r, tok, hg);
    mrow[i] = mod.row(p, hk * G + (r < rows_total ? hg : 0));
    if (lane % 4 == 0) {
      const int64_t pos = int64_t{tok} + sk - sq;
      s_bounds[r - m0] = make_int2(static_cast<int>(max(mask.lo(pos), int64_t{0})),
                                   static_cast<int>(min(mask.hi(pos), int64_t{sk} - 1)));
    }
  }

  // ---- global -> shared copies
  const T* gQ = static_cast<const T*>(p.q);
  const T* gK = static_cast<const T*>(p.kv.k);
  const T* gV = static_cast<const T*>(p.kv.v);
  copy_tile_async<kBlockM, kDqk, kQS, kThreads>(sQ, gQ, tid, [&](int row) -> const T* {
    const int r = m0 + row;
    if (r >= rows_total) return nullptr;
    int tok, hg;
    p.group.divmod(r, tok, hg);
    return gQ + b * p.q_batch_stride + int64_t{q_start + tok} * p.q_row_stride +
           int64_t{hk * G + hg} * p.q_head_stride;
  });
  // Contiguous and ragged KV: key j of this sequence is row j at a fixed stride from key 0.
  const bool paged = p.kv.kind == KvKind::kPaged;
  const T* k_seq = gK;
  const T* v_seq = gV;
  if (!paged && sk > 0) {
    int64_t outer = 0;
    int r0 = 0;
    p.kv.locate(b, kvs.start, 0, outer, r0);
    k_seq += p.kv.k_offset(outer, r0, hk);
    v_seq += p.kv.v_offset(outer, r0, hk);
  }
  auto load_k = [&](int n_block, int stage) {
    const int j0 = n_block * kBlockN;
    T* dK = sK + stage * kBlockN * kKS;
    if (!paged) {
      copy_rows_async<kBlockN, kDqk, kKS, kThreads>(dK, k_seq + int64_t{j0} * p.kv.k_row_stride,
                                                    p.kv.k_row_stride, sk - j0, tid);
    } else {
      copy_tile_async<kBlockN, kDqk, kKS, kThreads>(dK, gK, tid, [&](int row) -> const T* {
        const int j = j0 + row;
        if (j >= sk) return nullptr;
        int64_t outer;
        int r;
        p.kv.locate(b, kvs.start, j, outer, r);
        return gK + p.kv.k_offset(outer, r, hk);
      });
    }
  };
  auto load_v = [&](int n_block, int stage) {
    const int j0 = n_block * kBlockN;
    T* dV = sV + stage * kBlockN * kVS;
    if (!paged) {
      copy_rows_async<kBlockN, kDv, kVS, kThreads>(dV, v_seq + int64_t{j0} * p.kv.v_row_stride,
                                                   p.kv.v_row_stride, sk - j0, tid);
    } else {
      copy_tile_async<kBlockN, kDv, kVS, kThreads>(dV, gV, tid, [&](int row) -> const T* {
        const int j = j0 + row;
        if (j >= sk) return nullptr;
        int64_t outer;
        int r;
        p.kv.locate(b, kvs.start, j, outer, r);
        return gV + p.kv.v_offset(outer, r, hk);
      });
    }
  };
  auto load_kv = [&](int n_block, int stage) {
    load_k(n_block, stage);
    load_v(n_block, stage);
  };

  if constexpr (kStages == 1) {
    if (n_tiles > 0) load_k(n_begin, 0);
    cp_async_commit();  // with Q
  } else {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_tiles) load_kv(n_begin + s, s);
      cp_async_commit();  // group 0 also carries Q
    }
  }

  float acc[kMT][kWarpDv / 8][4];
  float m_run[kR], l_run[kR];  // m in log2 units (scale applied); l: this thread's partial sum
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < kWarpDv / 8; ++n)
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
  const uint32_t q_lane = smem_addr(sQ + (warp_row0 + (mi & 1) * 8 + mr) * kQS + (mi >> 1) * 8);
  // K as B (n x k stored row-major): matrices (n0, k0) (n0, k0+8) (n0+8, k0) (n0+8, k0+8).
  const uint32_t k_lane =
      smem_addr(sK + (half * kWarpKeys + (mi >> 1) * 8 + mr) * kKS + (mi & 1) * 8);
  // V as B via .trans (k x n stored row-major): (k0, n0) (k0+8, n0) (k0, n0+8) (k0+8, n0+8).
  const uint32_t v_lane =
      smem_addr(sV + ((mi & 1) * 8 + mr) * kVS + half * kWarpDv + (mi >> 1) * 8);
  // Pairs: the partner's P half as the A operand, addressed like Q.
  const uint32_t p_lane = smem_addr(sP + (warp_row0 + (mi & 1) * 8 + mr) * kPS + (mi >> 1) * 8);
  // A pair's named barrier (0 is __syncthreads).
  auto pair_sync = [&] {
    if constexpr (kPairs) asm volatile("bar.sync %0, 64;\n" ::"r"(1 + group) : "memory");
  };
  // This thread's row i within its warp's rows.
  auto row_in_warp = [&](int i) { return (i / 2) * 16 + lane / 4 + (i % 2) * 8; };

  // Warps whose rows are all padding (the sequence's last row tile) only help load. With a mask,
  // a warp also only helps load past the last key tile its last row sees (causal, 128-row tiles:
  // the upper two warps skip the diagonal's last key tile, whose MMAs would only multiply by
  // zero): tiles [warp_tiles, n_tiles). Bounds never decrease down the rows, so the last row's
  // bound holds for the whole warp.
  constexpr bool kMasked = !std::is_same_v<Mask, NoMask>;
  const bool warp_active = m0 + warp_row0 < rows_total;
  int warp_tiles = n_tiles;
  if (kMasked && warp_active) {
    const int r_last = min(m0 + warp_row0 + Tile::kWarpRows, rows_total) - 1;
    const int64_t hi = min(mask.hi(int64_t{p.group.div(r_last)} + sk - sq), int64_t{sk} - 1);
    const int64_t last_tile = hi < 0 ? -1 : hi / kBlockN;  // the last tile it sees
    warp_tiles = static_cast<int>(max(min(last_tile + 1, int64_t{n_end}) - n_begin, int64_t{0}));
  }
  // Scores in log2 units are s * c (linear mod) or the mod's output (c = 1).
  const float c = kLinear ? p.scale_log2 : 1.f;
  constexpr int kQF = Tile::kQInRegs ? kDqk / 16 : 1;
  uint32_t qf[kMT][kQF][4];

  int stage = 0;
  for (int t = 0; t < n_tiles; ++t) {
    if constexpr (kStages == 1) {
      // K(t) has landed, and every thread is past P V(t - 1): V's buffer is free.
      cp_async_wait<0>();
      __syncthreads();
      load_v(n_begin + t, 0);
      cp_async_commit();
    } else {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      // The stage refilled here was last read in iteration t - 1, which every thread has left.
      const int tn = t + kStages - 1;
      int st = stage + kStages - 1;
      if (st >= kStages) st -= kStages;
      if (tn < n_tiles) load_kv(n_begin + tn, st);
      cp_async_commit();
    }
    if constexpr (Tile::kQInRegs) {
      if (t == 0) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int kk = 0; kk < kDqk / 16; ++kk)
            ldmatrix_x4(q_lane + (mt * 16 * kQS + kk * 16) * 2, qf[mt][kk]);
      }
    }
    const uint32_t k_base_s = k_lane + stage * kBlockN * kKS * 2;
    const uint32_t v_base_s = v_lane + stage * kBlockN * kVS * 2;
    if (++stage == kStages) stage = 0;
    // Single buffers: once V(t) has landed and every thread is past Q K(t)^T, K(t + 1) may load.
    // Warps with no rows still take part (the barrier needs every thread).
    auto next_k = [&] {
      if constexpr (kStages == 1) {
        cp_async_wait<0>();
        // The non-aligned form: the warps that skip the tile reach this barrier from another
        // instruction, which __syncthreads (bar.sync, aligned) leaves undefined in PTX
        // (compute-sanitizer synccheck: "divergent threads in block"). As fast as bar.sync.
        asm volatile("barrier.sync 0;\n" ::: "memory");
        if (t + 1 < n_tiles) load_k(n_begin + t + 1, 0);
        cp_async_commit();
      }
    };
    // A skipped tile would leave the warp's rows as they are: every score of it is masked. A
    // skipping pair still takes its two barriers of the tile, so every warp passes the same
    // barriers in each tile (without them racecheck reports K / V hazards; the same speed).
    if (!warp_active || (kMasked && t >= warp_tiles)) {
      next_k();
      pair_sync();
      pair_sync();
      continue;
    }

    // ---- S = Q K^T
    float s[kMT][kWarpKeys / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kWarpKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kDqk / 16; ++kk) {
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Tile::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][kk][e];
        } else {
          ldmatrix_x4(q_lane + (mt * 16 * kQS + kk * 16) * 2, a[mt]);
        }
      }
#pragma unroll
      for (int nn = 0; nn < kWarpKeys / 16; ++nn) {
        uint32_t bk[4];
        ldmatrix_x4(k_base_s + (nn * 16 * kKS + kk * 16) * 2, bk);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          MmaOp<T>::run(s[mt][2 * nn], a[mt], bk[0], bk[1]);
          MmaOp<T>::run(s[mt][2 * nn + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // ---- score mod and mask (the linear mod applies its scale inside the exp2 below)
    const int j0 = (n_begin + t) * kBlockN;
    const bool full = n_begin + t >= full_begin && n_begin + t < full_end;
    const int jl = j0 + half * kWarpKeys + (lane % 4) * 2;
    if (!kLinear || !full) {
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        const int mt = i / 2, h = i % 2;
        const int pos = p.group.div(row_of(i)) + sk - sq;
        const int2 bounds = s_bounds[row_of(i) - m0];  // written before the loop's first barrier
        const int lo = bounds.x, hi = bounds.y;
#pragma unroll
        for (int n = 0; n < kWarpKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = jl + n * 8 + e;
            float x = s[mt][n][2 * h + e];
            if constexpr (!kLinear) x = mod.apply(x, mrow[i], pos, j);
            if (!full && (j < lo || j > hi)) x = -INFINITY;
            s[mt][n][2 * h + e] = x;
          }
      }
    }

    next_k();
    // ---- online softmax (log2 units)
    float mx[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int mt = i / 2, h = i % 2;
      float m = -INFINITY;
#pragma unroll
      for (int n = 0; n < kWarpKeys / 8; ++n)
        m = fmaxf(m, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      mx[i] = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    }
    if constexpr (kPairs) {  // the row max over both key halves, the same in both warps
      if (lane % 4 == 0)
#pragma unroll
        for (int i = 0; i < kR; ++i) s_red[warp * Tile::kWarpRows + row_in_warp(i)] = mx[i];
      pair_sync();
#pragma unroll
      for (int i = 0; i < kR; ++i)
        mx[i] = fmaxf(mx[i], s_red[(warp ^ 1) * Tile::kWarpRows + row_in_warp(i)]);
    }
    // The running max moves only when a row's max grows (by more than 2^8 with the lazy rescale);
    // O and l are rescaled only when some row of the warp moved.
    constexpr float kGrowth = Tile::kLazyRescale ? 8.f : 0.f;
    float m_prev[kR];
    bool moved = false;
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      // c > 0, so the max of the raw scores gives the max of the scaled ones.
      const float cand = mx[i] == -INFINITY ? -INFINITY : mx[i] * c;
      m_prev[i] = m_run[i];
      if (cand > m_run[i] + kGrowth) {
        m_run[i] = cand;
        moved = true;
      }
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        const int mt = i / 2, h = i % 2;
        const float alpha = exp2f(m_prev[i] - (m_run[i] == -INFINITY ? 0.f : m_run[i]));
        l_run[i] *= alpha;
#pragma unroll
        for (int n = 0; n < kWarpDv / 8; ++n) {
          acc[mt][n][2 * h] *= alpha;
          acc[mt][n][2 * h + 1] *= alpha;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int mt = i / 2, h = i % 2;
      const float m_use = m_run[i] == -INFINITY ? 0.f : m_run[i];
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kWarpKeys / 8; ++n) {
        s[mt][n][2 * h] = exp2f(fmaf(s[mt][n][2 * h], c, -m_use));
        s[mt][n][2 * h + 1] = exp2f(fmaf(s[mt][n][2 * h + 1], c, -m_use));
        sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
      }
      l_run[i] += sum;
    }

    // ---- O += P V (P re-packed from the S accumulators as the A operand)
    auto pv_step = [&](const uint32_t (&a)[kMT][4], int kk) {
#pragma unroll
      for (int nn = 0; nn < kWarpDv / 16; ++nn) {
        uint32_t bv[4];
        ldmatrix_x4_trans(v_base_s + (kk * 16 * kVS + nn * 16) * 2, bv);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          MmaOp<T>::run(acc[mt][2 * nn], a[mt], bv[0], bv[1]);
          MmaOp<T>::run(acc[mt][2 * nn + 1], a[mt], bv[2], bv[3]);
        }
      }
    };
    if constexpr (kPairs) {  // the partner's P half, through shared memory
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int n = 0; n < kWarpKeys / 8; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            *reinterpret_cast<uint32_t*>(
                sP + (warp_row0 + mt * 16 + h * 8 + lane / 4) * kPS + half * kWarpKeys + n * 8 +
                (lane % 4) * 2) = pack2<T>(s[mt][n][2 * h], s[mt][n][2 * h + 1]);
      pair_sync();
    }
#pragma unroll
    for (int kk = 0; kk < kWarpKeys / 16; ++kk) {  // this warp's own P
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
      pv_step(a, half * (kWarpKeys / 16) + kk);
    }
    if constexpr (kPairs) {
      const int other = (1 - half) * kWarpKeys;
#pragma unroll
      for (int kk = 0; kk < kWarpKeys / 16; ++kk) {
        uint32_t a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
          ldmatrix_x4(p_lane + (mt * 16 * kPS + other + kk * 16) * 2, a[mt]);
        pv_step(a, other / 16 + kk);
      }
    }
  }
  // Nothing may still be landing in shared memory (Q included, when there was no key tile)
  // before the O staging reuses the Q rows.
  cp_async_wait<0>();
  __syncthreads();

  // ---- epilogue: per row, the normaliser (sinks folded in) and the LSE
  const bool partial = p.num_splits > 1;
  float l_row[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l_row[i] = l + __shfl_xor_sync(0xffffffffu, l, 2);
  }
  if constexpr (kPairs) {  // each warp summed its own key half (the barrier above freed s_red)
    if (lane % 4 == 0)
#pragma unroll
      for (int i = 0; i < kR; ++i) s_red[warp * Tile::kWarpRows + row_in_warp(i)] = l_row[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kR; ++i) l_row[i] += s_red[(warp ^ 1) * Tile::kWarpRows + row_in_warp(i)];
  }
  float o_scale[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int r = m0 + warp_row0 + row_in_warp(i);
    int tok, hg;
    p.group.divmod(r, tok, hg);
    const int head = hk * G + hg;
    const bool valid = r < rows_total;
    float l = l_row[i];
    const float m = m_run[i];
    float lse;
    if (l == 0.f) {  // no visible key (a sink alone does not count): O = 0, LSE = -inf
      o_scale[i] = 0.f;
      lse = -INFINITY;
    } else if (!partial && p.sinks != nullptr && valid) {
      const float s2 = __ldg(p.sinks + head * p.sinks_stride) * kLog2e;
      const float m_fin = fmaxf(m, s2);
      l = l * exp2f(m - m_fin) + exp2f(s2 - m_fin);
      o_scale[i] = exp2f(m - m_fin) / l;
      lse = (m_fin + log2f(l)) * kLn2;
    } else {
      o_scale[i] = 1.f / l;
      lse = (m + log2f(l)) * kLn2;
    }
    if (!valid || lane % 4 != 0 || half != 0) continue;  // a pair's rows: written once
    if (partial) {
      const int64_t flat =
          p.cu_seqlens_q != nullptr ? int64_t{q_start} + tok : int64_t{b} * p.q_rows + tok;
      p.part_lse[(int64_t{split} * p.part_rows + flat) * p.hq + head] = lse;
    } else if (p.lse != nullptr) {
      p.lse[b * p.lse_batch_stride + int64_t{q_start + tok} * p.lse_row_stride +
            int64_t{head} * p.lse_head_stride] = lse;
    }
  }

  if (partial) {  // fp32 partials straight from the accumulators
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int mt = i / 2, h = i % 2;
      const int r = m0 + warp_row0 + mt * 16 + lane / 4 + h * 8;
      if (r >= rows_total) continue;
      int tok, hg;
      p.group.divmod(r, tok, hg);
      const int64_t flat =
          p.cu_seqlens_q != nullptr ? int64_t{q_start} + tok : int64_t{b} * p.q_rows + tok;
      const int64_t idx = (int64_t{split} * p.part_rows + flat) * p.hq + hk * G + hg;
      float* dst = p.part_o + idx * kDv + half * kWarpDv + (lane % 4) * 2;
#pragma unroll
      for (int n = 0; n < kWarpDv / 8; ++n)
        *reinterpret_cast<float2*>(dst + n * 8) =
            make_float2(acc[mt][n][2 * h] * o_scale[i], acc[mt][n][2 * h + 1] * o_scale[i]);
    }
    return;
  }

  // O through shared memory: Q is dead (the barrier above), each warp stages its own rows (its
  // Dv half of them, with pairs) in a slice of it and writes whole 16-byte pieces of each row (O
  // is 16-byte aligned with 16-byte strides: the API validates that for the GPU kernels).
  T* sO = sQ + warp_row0 * kOS + half * kWarpDv;
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int mt = i / 2, h = i % 2;
    T* row = sO + (mt * 16 + h * 8 + lane / 4) * kOS + (lane % 4) * 2;
#pragma unroll
    for (int n = 0; n < kWarpDv / 8; ++n)
      *reinterpret_cast<uint32_t*>(row + n * 8) =
          pack2<T>(acc[mt][n][2 * h] * o_scale[i], acc[mt][n][2 * h + 1] * o_scale[i]);
  }
  __syncwarp();
  constexpr int kPieces = kWarpDv / 8;  // 16-byte pieces per row (of this warp's columns)
  static_assert((Tile::kWarpRows * kPieces) % 32 == 0, "whole warp passes over the staged rows");
  // One query head per KV head: the warp's rows are consecutive tokens, at a fixed stride.
  T* const o_warp = static_cast<T*>(p.o) + b * p.o_batch_stride +
                    int64_t{q_start + m0 + warp_row0} * p.o_row_stride +
                    int64_t{hk} * p.o_head_stride + half * kWarpDv;
#pragma unroll
  for (int k = 0; k < Tile::kWarpRows * kPieces / 32; ++k) {
    const int c_idx = lane + k * 32;
    const int rl = c_idx / kPieces, col = (c_idx % kPieces) * 8;
    const int r = m0 + warp_row0 + rl;
    if (r >= rows_total) continue;
    T* dst;
    if (G == 1) {
      dst = o_warp + int64_t{rl} * p.o_row_stride + col;
    } else {
      int tok, hg;
      p.group.divmod(r, tok, hg);
      dst = static_cast<T*>(p.o) + b * p.o_batch_stride + int64_t{q_start + tok} * p.o_row_stride +
            int64_t{hk * G + hg} * p.o_head_stride + half * kWarpDv + col;
    }
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(sO + rl * kOS + col);
  }
}

}  // namespace attnkit::gpu
