// The Hopper decode attention kernel: the portable decode kernel's work split and math
// (decode_kernel.cuh: one CTA per (sequence, KV head, split), the GQA group's query rows in the
// MMA tile, 2 * kKG warps splitting each tile by 16-key group and Dv half, the in-kernel split
// merge), with K and V brought in by TMA instead of per-thread cp.async copies.
//
// Loads. Warp 0 issues every copy: per kBlockN-key tile, kBlockN / R boxes of R rows for K and for
// V (sm90_decode_tiles.h: contiguous and ragged caches take the tile in one box, paged ones one box
// per R rows of a page), into a kStages-deep ring whose slots complete on mbarriers (full: the
// bytes landed; empty: all warps finished reading). One instruction moves up to 8 KB, so the SM's
// load issue no longer bounds the bytes in flight, and no address arithmetic runs per 16 bytes.
// A paged tile's page-table entries are read one tile ahead, by the lanes that issue its boxes.
// Shared memory holds K and V in TMA's 128-byte swizzle; ldmatrix reads it conflict-free.
//
// No cache slot past a sequence's end is read (the box rule of sm90_decode_tiles.h): the box
// holding the last key is shifted back to end at it, and its repeated rows are masked.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include <cstdint>

#include "cuda/attention/common/decode_math.cuh"
#include "cuda/attention/policy/mask.cuh"
#include "cuda/attention/policy/score_mod.cuh"
#include "cuda/attention/portable/decode_kernel.cuh"
#include "cuda/attention/common/decode_merge.cuh"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/attention/sm90/sm90_decode_tiles.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu::sm90 {

// One launch: the portable parameters plus K's and V's tensor maps (sm90_decode_launch.cuh).
struct DecodeTmaParams {
  CUtensorMap tma_k, tma_v;  // 64-byte aligned: first
  FwdParams p;
  int box_rows = 0;        // R: rows per TMA box (decode_box_rows)
  int box_shift = 0;       // log2(R)
  uint64_t l2_hint = 0;    // the copies' L2 cache policy
};

// Shared memory per SM and per block on sm_90, and what the hardware keeps per block.
inline constexpr int kSm90SmemPerSm = 228 * 1024, kSm90SmemPerBlock = 227 * 1024;
inline constexpr int kSm90SmemReserved = 1024;
// Static shared memory of the kernel (barriers, the merge's flag) and the swizzle alignment pad.
inline constexpr int kDecodeTmaStaticSmem = 256, kDecodeTmaAlignPad = 1024;

template <int kD_, int kMT_>
struct DecodeTmaTile {
  static constexpr int kDqk = kD_, kDv = kD_, kMT = kMT_, kKG = 4;
  static constexpr int kRows = 16 * kMT, kWarps = 2 * kKG, kThreads = 32 * kWarps;
  static constexpr int kBlockN = 16 * kKG;
  static constexpr int kDvWarp = kDv / 2;
  static constexpr int kQS = kDqk + 8, kQBytes = kRows * kQS * 2;  // Q rows padded by 16 bytes
  static constexpr int kTileBytes = kBlockN * kDqk * 2;             // K or V of one stage
  static constexpr int kStageBytes = 2 * kTileBytes;
  // Two CTAs per SM where two stages each fit; else one with as many stages as fit.
  static constexpr int kFixed = kQBytes + kDecodeTmaAlignPad + kDecodeTmaStaticSmem;
  static constexpr int kStages2 = (kSm90SmemPerSm / 2 - kSm90SmemReserved - kFixed) / kStageBytes;
  static constexpr int kCtasPerSm = kStages2 >= 2 ? 2 : 1;
  static constexpr int kStagesFit =
      kCtasPerSm == 2 ? kStages2 : (kSm90SmemPerBlock - kFixed) / kStageBytes;
  static constexpr int kStages = kStagesFit > 8 ? 8 : kStagesFit;
  static constexpr int kSmemBytes = kDecodeTmaAlignPad + kStages * kStageBytes + kQBytes;
  static constexpr bool kQInRegs = kMT * kDqk <= 128;
  static constexpr int kMergeBytes = kKG * kRows * (kDv + 2) * 4;
  static_assert(kBlockN == kDecodeTmaKeys, "the dispatcher plans pages for kDecodeTmaKeys");
  static_assert(kStages >= 2, "two stages must fit");
  static_assert(kMergeBytes <= kStages * kStageBytes, "merge buffer must fit in the stages");
  static_assert(kDqk % kSwizzleCols == 0, "head dims: multiples of 64");
  static_assert(kMT == 1 || kMT == 2, "decode tiles hold 16 or 32 rows");
};

template <class Tile, typename T, class Mask, class Mod>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kCtasPerSm)
    sm90_decode_kernel(const __grid_constant__ DecodeTmaParams P) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using FullBar = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBar = cutlass::arch::ClusterBarrier;
  constexpr int kDqk = Tile::kDqk, kDv = Tile::kDv, kMT = Tile::kMT, kR = 2 * kMT;
  constexpr int kRows = Tile::kRows, kBlockN = Tile::kBlockN, kStages = Tile::kStages;
  constexpr int kKG = Tile::kKG, kWarps = Tile::kWarps, kThreads = Tile::kThreads;
  constexpr int kDvWarp = Tile::kDvWarp, kQS = Tile::kQS, kTileBytes = Tile::kTileBytes;
  constexpr int kStageBytes = Tile::kStageBytes;
  const FwdParams& p = P.p;

  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full_bar[kStages], empty_bar[kStages];
  // Stages at a multiple of 1024 bytes (the swizzle atom), Q after them.
  const uint32_t raw_addr = smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024 - raw_addr % 1024) % 1024);
  const uint32_t stages_addr = smem_addr(smem);
  T* sQ = reinterpret_cast<T*>(smem + kStages * kStageBytes);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int kh = warp % kKG, dh = warp / kKG;  // key group, Dv half
  const int hk = blockIdx.x % p.hkv, split = blockIdx.x / p.hkv;
  const int b = blockIdx.y;
  const int G = p.group.d;

  const QSeq qs = q_sequence(p, b);
  const int q_start = qs.start;
  const int rows_total = min(qs.length * G, kRows);  // dispatch keeps max_seqlen_q * G <= kRows
  if (rows_total <= 0) return;
  const KvOperand::Seq kvs = p.kv.sequence(b);
  const int sk = kvs.length, sq = qs.length;
  const Mask mask(p);
  const Mod mod(p);

  // ---- the key tiles of this split (as the portable kernel)
  const int t_max = p.group.div(rows_total - 1);
  const int64_t p_min = int64_t{sk} - sq, p_max = int64_t{t_max} + sk - sq;
  const int64_t key_lo = max(mask.lo(p_min), int64_t{0});
  const int64_t key_hi = min(mask.hi(p_max), int64_t{sk} - 1);
  int n_begin = 0, n_end = 0;
  if (key_hi >= key_lo) {
    n_begin = static_cast<int>(key_lo / kBlockN);
    n_end = static_cast<int>(key_hi / kBlockN) + 1;
  }
  {
    const int64_t n = n_end - n_begin;
    const int s_begin = n_begin + static_cast<int>(n * split / p.num_splits);
    n_end = n_begin + static_cast<int>(n * (split + 1) / p.num_splits);
    n_begin = s_begin;
  }
  const int n_tiles = n_end - n_begin;
  const int64_t full_lo = mask.lo(p_max);
  const int64_t full_hi = min(mask.hi(p_min), int64_t{sk} - 1);

  int row_p[kR], row_lo[kR], row_hi[kR];
  typename Mod::Row mrow[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int r = (i / 2) * 16 + lane / 4 + (i % 2) * 8;
    int tok, hg;
    p.group.divmod(r, tok, hg);
    row_p[i] = tok + sk - sq;
    row_lo[i] = static_cast<int>(max(mask.lo(row_p[i]), int64_t{0}));
    row_hi[i] = static_cast<int>(min(mask.hi(row_p[i]), int64_t{sk} - 1));
    mrow[i] = mod.row(p, r < rows_total ? hk * G + hg : hk * G);
  }

  // ---- Q through cp.async into padded rows
  {
    const T* gQ = static_cast<const T*>(p.q);
    constexpr int kChunks = kDqk / 8;
    for (int c = tid; c < kRows * kChunks; c += kThreads) {
      const int row = c / kChunks, col = (c % kChunks) * 8;
      int tok, hg;
      p.group.divmod(row, tok, hg);
      const bool ok = row < rows_total;
      const T* src = ok ? gQ + b * p.q_batch_stride + int64_t{q_start + tok} * p.q_row_stride +
                              int64_t{hk * G + hg} * p.q_head_stride + col
                        : gQ;
      cp_async_16(smem_addr(sQ + row * kQS + col), src, ok);
    }
    cp_async_commit();
  }

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      FullBar::init(&full_bar[s], 1);
      EmptyBar::init(&empty_bar[s], kWarps);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // ---- the producer: warp 0, lane i issuing box i of a tile
  const bool paged = p.kv.kind == KvKind::kPaged;
  const int box_rows = P.box_rows, boxes = kBlockN >> P.box_shift;
  const int outer_fixed = p.kv.kind == KvKind::kContiguous ? b : 0;
  // Lane i's page-table entry for box i of tile n (paged; 0 when the box loads nothing).
  auto page_entry = [&](int n) {
    const int jb = n * kBlockN + lane * box_rows;
    return paged && lane < boxes && jb < sk ? p.kv.page_entry(b, p.kv.page_size.div(jb)) : 0;
  };
  auto issue = [&](int n, int stage, int entry) {
    if (lane == 0) FullBar::arrive_and_expect_tx(&full_bar[stage], kStageBytes);
    __syncwarp();
    if (lane < boxes) {
      const int jb = n * kBlockN + lane * box_rows;
      const int first = decode_box_first(jb, box_rows, sk);
      int row = -box_rows, outer = paged ? 0 : outer_fixed;  // no box: all rows zero-filled
      if (first != kNoBox) {
        if (paged) {
          row = first - p.kv.page_size.div(jb) * p.kv.page_size.d;  // < 0: zero fill
          outer = p.kv.clamp_page(entry);
        } else {
          row = kvs.start + first;
        }
      }
      unsigned char* dst = smem + stage * kStageBytes + lane * box_rows * 128;
#pragma unroll
      for (int c = 0; c < kDqk / kSwizzleCols; ++c) {
        cute::SM90_TMA_LOAD_4D::copy(&P.tma_k, &full_bar[stage], P.l2_hint,
                                     dst + c * kBlockN * 128, c * kSwizzleCols, row, hk, outer);
        cute::SM90_TMA_LOAD_4D::copy(&P.tma_v, &full_bar[stage], P.l2_hint,
                                     dst + kTileBytes + c * kBlockN * 128, c * kSwizzleCols, row,
                                     hk, outer);
      }
    }
  };
  int entry_next = 0;  // warp 0: the entry of tile n_begin + kStages (paged)
  if (warp == 0) {
    int entry[kStages];
#pragma unroll
    for (int s = 0; s < kStages; ++s) entry[s] = s < n_tiles ? page_entry(n_begin + s) : 0;
    if (kStages < n_tiles) entry_next = page_entry(n_begin + kStages);
#pragma unroll
    for (int s = 0; s < kStages; ++s)
      if (s < n_tiles) issue(n_begin + s, s, entry[s]);
  }

  float acc[kMT][kDvWarp / 8][4];
  float m_run[kR], l_run[kR];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int n = 0; n < kDvWarp / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][n][e] = 0.f;
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    m_run[i] = -INFINITY;
    l_run[i] = 0.f;
  }

  // ldmatrix lane addressing: matrix mi = lane / 8, row-in-matrix lane % 8.
  const int mi = lane / 8, mr = lane % 8;
  const uint32_t q_lane = smem_addr(sQ + ((mi & 1) * 8 + mr) * kQS + (mi >> 1) * 8);
  // K as B (n x k): matrices (n0, k0) (n0, k0+8) (n0+8, k0) (n0+8, k0+8) of this key group.
  const SwizzleLane k_lane = sw128_lane(kh * 16 + (mi >> 1) * 8 + mr, (mi & 1) * 8, kBlockN);
  // V as B via .trans (k x n): (k0, n0) (k0+8, n0) (k0, n0+8) (k0+8, n0+8) of this Dv half.
  const SwizzleLane v_lane =
      sw128_lane(kh * 16 + (mi & 1) * 8 + mr, dh * kDvWarp + (mi >> 1) * 8, kBlockN);

  constexpr int kQFrags = Tile::kQInRegs ? kDqk / 16 : 1;
  uint32_t qf[kMT][kQFrags][4];
  cp_async_wait<0>();
  __syncthreads();  // Q landed for every warp
  if constexpr (Tile::kQInRegs) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < kDqk / 16; ++kk)
        ldmatrix_x4(q_lane + (mt * 16 * kQS + kk * 16) * 2, qf[mt][kk]);
  }
  auto q_frag = [&](int mt, int kk, uint32_t(&a)[4]) {
    if constexpr (Tile::kQInRegs) {
#pragma unroll
      for (int e = 0; e < 4; ++e) a[e] = qf[mt][kk][e];
    } else {
      ldmatrix_x4(q_lane + (mt * 16 * kQS + kk * 16) * 2, a);
    }
  };

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t % kStages;
    const uint32_t phase = (t / kStages) & 1;
    FullBar::wait(&full_bar[stage], phase);
    const uint32_t k_tile = stages_addr + stage * kStageBytes;
    const uint32_t v_tile = k_tile + kTileBytes;

    // ---- S = Q K^T over this warp's 16 keys
    float s[kMT][2][4];
    decode_qk<T, kMT, kDqk>([&](int kk) { return k_tile + sw128_step(k_lane, kk * 16, kBlockN); },
                            q_frag, s);

    // ---- score mod, mask, online softmax (log2 units). A tile that is not fully visible maps
    // each row to its key by the box rule (the last box may be shifted).
    const int j0 = (n_begin + t) * kBlockN;
    const bool full = full_lo <= j0 && j0 + kBlockN - 1 <= full_hi;
    const int rl = kh * 16 + (lane % 4) * 2;  // this thread's first row of the tile
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = mt * 2 + (e >> 1);
          const int r = rl + n * 8 + (e & 1);
          float x = s[mt][n][e];
          if (full) {
            x = mod.apply(x, mrow[i], row_p[i], j0 + r);
          } else {
            const int box = r >> P.box_shift;
            int j = 0;
            const bool own = decode_box_key(j0 + (box << P.box_shift), box_rows, sk,
                                            r - (box << P.box_shift), &j);
            x = mod.apply(x, mrow[i], row_p[i], j);
            if (!own || j < row_lo[i] || j > row_hi[i]) x = -INFINITY;
          }
          s[mt][n][e] = x;
        }
    decode_online_softmax(s, m_run, l_run, acc);

    // ---- O += P V over this warp's 16 keys and Dv half
    uint32_t pa[kMT][4];
    decode_pack_p<T>(s, pa);
    decode_pv<T, kMT, kDvWarp>(
        [&](int nn) { return v_tile + sw128_step(v_lane, nn * 16, kBlockN); }, pa, acc);

    // ---- hand the stage back; warp 0 refills it once every warp has
    __syncwarp();
    if (lane == 0) EmptyBar::arrive(&empty_bar[stage]);
    if (warp == 0 && t + kStages < n_tiles) {
      EmptyBar::wait(&empty_bar[stage], phase);
      issue(n_begin + t + kStages, stage, entry_next);
      if (t + kStages + 1 < n_tiles) entry_next = page_entry(n_begin + t + kStages + 1);
    }
  }
  __syncthreads();  // every copy landed and was read: the merge reuses the stages

  // ---- merge the key groups through shared memory, then store (as the portable kernel)
  float* red = reinterpret_cast<float*>(smem);
  float* red_m = red + kKG * kRows * kDv;  // [kKG][kRows]
  float* red_l = red_m + kKG * kRows;       // [kKG][kRows]
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int mt = i / 2, h = i % 2;
    const int rr = mt * 16 + lane / 4 + h * 8;
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (dh == 0 && lane % 4 == 0) {
      red_m[kh * kRows + rr] = m_run[i];
      red_l[kh * kRows + rr] = l;
    }
    decode_stash_o<kRows, kDv, kDvWarp>(red, i, rr, kh, dh, lane, acc);
  }
  __syncthreads();
  decode_store<Tile, T>(p, red, rows_total, b, hk, q_start, split);
  if (p.num_splits > 1) decode_merge_if_last<Tile, T>(p, rows_total, b, hk, q_start);
#endif
}

}  // namespace attnkit::gpu::sm90
