// The portable (sm_80+) decode attention kernel: a few query tokens against a long KV cache,
// memory bound, so the whole design is about reading K and V once at full bandwidth.
//
// One CTA = one (sequence, KV head, split): its rows are every (query token, query head of the
// GQA group) pair, row r = token * group + head_in_group, at most 16 * kMT of them, so K and V of
// the head are read exactly once. Keys stream through a kStages-deep cp.async pipeline of
// kBlockN-key stages (35-70 KB in flight per CTA; two CTAs fit an SM), all of them filled before
// the first compute.
// The 2 * kKG warps split each stage kKG x 2: key group (16 keys each; S = Q K^T is computed by
// both warps of a key group, which costs nothing on a memory-bound kernel) and Dv half
// (O += P V), so each warp holds only half of O. At the end the key groups merge through shared
// memory and the CTA writes its rows with coalesced stores: O (sinks folded in) without splits,
// else a normalised fp32 partial O and its natural-log LSE; the last split of the KV head to
// finish then merges all of them into O (decode_merge.cuh), so no second kernel runs.
//
// Paged KV: the page-table entries of a stage are loaded one loop iteration before its addresses
// are formed, so a page-table read never stalls the copies behind it. Rows with no visible key:
// O = 0 and LSE = -inf, with or without a sink.
//
// Each K/V byte of a call is read once, by one CTA; how its lines enter L2 is the tile's KvL2
// policy, which the planner picks per call (decode_l2_stream, planner.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/common/decode_math.cuh"
#include "cuda/attention/policy/mask.cuh"
#include "cuda/attention/policy/score_mod.cuh"
#include "cuda/attention/portable/decode_fp8.cuh"
#include "cuda/attention/common/decode_merge.cuh"
#include "cuda/attention/portable/fwd_params.h"
#include "cuda/common/mma_sm80.cuh"

namespace attnkit::gpu {

// Shared memory a decode CTA may use: two CTAs per SM on sm_80/sm_90, and within sm_86/89's
// 99 KB per-block limit.
inline constexpr int kDecodeSmemBudget = 96 * 1024;

// How a decode CTA's K/V lines enter L2.
struct KvL2Normal {  // the default policy
  struct Policy {};
  __device__ static Policy make() { return {}; }
  __device__ static void copy(Policy, uint32_t dst, const void* src, bool valid) {
    cp_async_16(dst, src, valid);
  }
};
struct KvL2Stream {  // evict-first: the stream replaces its own lines, not the ones L2 holds
  using Policy = uint64_t;
  __device__ static Policy make() { return l2_evict_first_policy(); }
  __device__ static void copy(Policy policy, uint32_t dst, const void* src, bool valid) {
    cp_async_16(dst, src, valid, policy);
  }
};

// kKG_: key groups of 16 keys per stage (2: 4 warps, 32-key stages; 4: 8 warps, 64-key stages).
// KvL2_: the K/V copies' L2 policy (KvL2Normal or KvL2Stream). kFp8_: K / V are e4m3 with scales
// (decode_fp8.cuh), else the query's type.
template <int kDqk_, int kDv_, int kMT_, int kKG_ = 2, class KvL2_ = KvL2Normal, bool kFp8_ = false>
struct DecodeTile {
  static constexpr int kDqk = kDqk_, kDv = kDv_, kMT = kMT_, kKG = kKG_;
  static constexpr bool kFp8 = kFp8_;
  static constexpr int kKvBytes = kFp8 ? 1 : 2;  // bytes of a K / V element
  static constexpr int kCE = 16 / kKvBytes;      // K / V elements per 16-byte copy
  using KvL2 = KvL2_;
  static constexpr int kRows = 16 * kMT;
  static constexpr int kWarps = 2 * kKG, kThreads = 32 * kWarps;
  // Two CTAs per SM (the shared-memory budget's aim): registers are capped to fit them.
  static constexpr int kCtasPerSm = 2;
  static constexpr int kBlockN = 16 * kKG;  // keys per stage: 16 per key group
  static constexpr int kDvWarp = kDv / 2;  // O columns per warp
  // Rows padded by 16 bytes: the 8 rows an ldmatrix reads fall in distinct banks. Strides in
  // elements (Q: T; K / V: the cache's type).
  static constexpr int kQS = kDqk + 8, kKS = kDqk + kCE, kVS = kDv + kCE;
  static constexpr int kQBytes = kRows * kQS * 2;
  // FP8 per-token scales: kBlockN of K's, then kBlockN of V's, per stage.
  static constexpr int kScaleFloats = kFp8 ? 2 * kBlockN : 0;
  static constexpr int kStageBytes = kBlockN * (kKS + kVS) * kKvBytes + kScaleFloats * 4;
  static constexpr int kStagesFit = (kDecodeSmemBudget - kQBytes) / kStageBytes;
  static constexpr int kStages = kStagesFit > 8 ? 8 : kStagesFit < 2 ? 2 : kStagesFit;
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes;
  // Q fragments stay in registers when they are at most 32 of them (beside O and the stage
  // addresses) and the register cap allows (not at 8 warps x 2 CTAs); otherwise ldmatrix re-reads
  // them from shared memory for every stage.
  static constexpr bool kQInRegs = kMT * kDqk <= 128 && kKG == 2;
  // The key-group merge reuses the stages: fp32 O, m and l per key group.
  static constexpr int kMergeBytes = kKG * kRows * (kDv + 2) * 4;
  static_assert(kMergeBytes <= kStages * kStageBytes, "merge buffer must fit in the stages");
  static_assert(kDqk % 16 == 0 && kDvWarp % 16 == 0, "head dims: multiples of 16 (Dv of 32)");
  static_assert(kMT == 1 || kMT == 2, "decode tiles hold 16 or 32 rows");
  static_assert(kKG == 2 || kKG == 4, "decode tiles have 2 or 4 key groups");
  static_assert(kStagesFit >= 2, "two stages must fit the shared-memory budget");
  static_assert(!kFp8 || (kDqk % 32 == 0 && kDvWarp % 32 == 0),
                "FP8 K / V: head dims multiples of 32 (Dv of 64)");
};

// Key groups of the tile each decode variant runs. 8 warps (4 key groups, 64-key stages: two
// stages and Q in the 96 KB budget at head dim 128, 116 registers under the 2-CTA cap) measured
// faster than the 4-warp tile for paged KV and as fast for contiguous KV on the decode bench
// shapes (the plain variant); split calls over contiguous or ragged KV (kSplitContiguous), whose
// prologue fills five 32-key stages of the 4-warp tile against two 64-key ones, measured faster
// with 4 warps. The generic variant (it would spill under the cap), other head dims and 32-row
// tiles keep 4 warps: not measured.
template <int kDqk, int kDv, int kMT, bool kPlain, bool kSplitContiguous>
constexpr int decode_key_groups() {
  return kPlain && kDqk == 128 && kDv == 128 && kMT == 1 && !kSplitContiguous ? 4 : 2;
}

// Writes rows [0, rows) of the CTA from the merge buffer: out = sum_g O_g w_g / l over the key
// groups' states, as O (sinks folded in) or as the split's fp32 partial.
template <class Tile, typename T>
__device__ __forceinline__ void decode_store(const FwdParams& p, const float* red, int rows,
                                             int b, int hk, int q_start, int split) {
  constexpr int kDv = Tile::kDv, kRows = Tile::kRows, kC = kDv / 4, kKG = Tile::kKG;
  const float* red_o = red;                       // [kKG][kRows][kDv]
  const float* red_m = red + kKG * kRows * kDv;  // [kKG][kRows]
  const float* red_l = red_m + kKG * kRows;       // [kKG][kRows]
  const bool partial = p.num_splits > 1;
  for (int idx = threadIdx.x; idx < rows * kC; idx += Tile::kThreads) {
    const int rr = idx / kC, c = (idx % kC) * 4;
    int tok, hg;
    p.group.divmod(rr, tok, hg);
    const int head = hk * p.group.d + hg;
    float m = -INFINITY;
#pragma unroll
    for (int g = 0; g < kKG; ++g) m = fmaxf(m, red_m[g * kRows + rr]);
    const float m_use = m == -INFINITY ? 0.f : m;
    float w[kKG];
    float l = 0.f;
#pragma unroll
    for (int g = 0; g < kKG; ++g) {
      w[g] = exp2f(red_m[g * kRows + rr] - m_use);
      l += red_l[g * kRows + rr] * w[g];
    }
    float o_scale, lse;
    if (l == 0.f) {  // no visible key (a sink alone does not count)
      o_scale = 0.f;
      lse = -INFINITY;
    } else if (!partial && p.sinks != nullptr) {
      const float s2 = __ldg(p.sinks + head * p.sinks_stride) * kLog2e;
      const float m_fin = fmaxf(m_use, s2);
      const float keep = exp2f(m_use - m_fin);
      l = l * keep + exp2f(s2 - m_fin);
      o_scale = keep / l;
      lse = (m_fin + log2f(l)) * kLn2;
    } else {
      o_scale = 1.f / l;
      lse = (m_use + log2f(l)) * kLn2;
    }
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int g = 0; g < kKG; ++g) {
      const float4 a = *reinterpret_cast<const float4*>(red_o + (g * kRows + rr) * kDv + c);
      const float sg = w[g] * o_scale;
      o.x += a.x * sg;
      o.y += a.y * sg;
      o.z += a.z * sg;
      o.w += a.w * sg;
    }
    if (partial) {
      const int64_t flat = p.cu_seqlens_q != nullptr ? int64_t{q_start} + tok
                                                     : int64_t{b} * p.q_rows + tok;
      const int64_t pi = (int64_t{split} * p.part_rows + flat) * p.hq + head;
      *reinterpret_cast<float4*>(p.part_o + pi * kDv + c) = o;
      if (c == 0) p.part_lse[pi] = lse;
    } else {
      T* dst = static_cast<T*>(p.o) + b * p.o_batch_stride +
               int64_t{q_start + tok} * p.o_row_stride + int64_t{head} * p.o_head_stride + c;
      dst[0] = from_float<T>(o.x);
      dst[1] = from_float<T>(o.y);
      dst[2] = from_float<T>(o.z);
      dst[3] = from_float<T>(o.w);
      if (p.lse != nullptr && c == 0)
        p.lse[b * p.lse_batch_stride + int64_t{q_start + tok} * p.lse_row_stride +
              int64_t{head} * p.lse_head_stride] = lse;
    }
  }
}

template <class Tile, typename T, class Mask, class Mod>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kCtasPerSm)
    portable_decode_kernel(const __grid_constant__ FwdParams p) {
  constexpr int kDqk = Tile::kDqk, kDv = Tile::kDv, kMT = Tile::kMT, kR = 2 * kMT;
  constexpr int kRows = Tile::kRows, kBlockN = Tile::kBlockN, kStages = Tile::kStages;
  constexpr int kKG = Tile::kKG;
  constexpr int kThreads = Tile::kThreads, kDvWarp = Tile::kDvWarp;
  constexpr int kQS = Tile::kQS, kKS = Tile::kKS, kVS = Tile::kVS;

  constexpr bool kFp8 = Tile::kFp8;
  constexpr int kCE = Tile::kCE;
  using KvT = std::conditional_t<kFp8, uint8_t, T>;
  using MmaT = std::conditional_t<kFp8, __half, T>;  // FP8: fp16 MMAs (decode_fp8.cuh)

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  KvT* sK = reinterpret_cast<KvT*>(sQ + kRows * kQS);
  KvT* sV = sK + kStages * kBlockN * kKS;
  // FP8 per-token scales: [stage][K, V][kBlockN]
  float* sScale = reinterpret_cast<float*>(sV + kStages * kBlockN * kVS);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int kh = warp % kKG, dh = warp / kKG;  // key group, Dv half
  // grid: x = split * kv_heads + kv head (heads of one key range run side by side), y = sequence
  const int hk = blockIdx.x % p.hkv, split = blockIdx.x / p.hkv;
  const int b = blockIdx.y;
  const int G = p.group.d;

  // Paged KV: the page-table reads wait on the sequence length (seqused_k) and this split's key
  // range. Guess that range as if the sequence filled its pages and had no mask, and warm L2 with
  // the entries of its first stages now, while the length is read.
  if (p.kv.kind == KvKind::kPaged && p.kv.num_pages > 0) {
    const int64_t n_all = (int64_t{p.kv.k_rows} + kBlockN - 1) / kBlockN;
    const int64_t nb = n_all * split / p.num_splits;
    p.kv.prefetch_pages(b, static_cast<int>(nb * kBlockN),
                        static_cast<int>(min((nb + kStages) * kBlockN, int64_t{p.kv.k_rows})), tid,
                        kThreads);
  }

  const QSeq qs = q_sequence(p, b);
  const int q_start = qs.start;
  // Dispatch guarantees max_seqlen_q * G <= kRows; a corrupt cu_seqlens_q may claim more.
  const int rows_total = min(qs.length * G, kRows);
  if (rows_total <= 0) return;
  const KvOperand::Seq kvs = p.kv.sequence(b);
  const int sk = kvs.length, sq = qs.length;

  const Mask mask(p);
  const Mod mod(p);

  // ---- the key blocks of this split
  const int t_max = p.group.div(rows_total - 1);
  const int64_t p_min = int64_t{sk} - sq, p_max = int64_t{t_max} + sk - sq;
  const int64_t key_lo = max(mask.lo(p_min), int64_t{0});
  const int64_t key_hi = min(mask.hi(p_max), int64_t{sk} - 1);
  int n_begin = 0, n_end = 0;
  if (key_hi >= key_lo) {
    n_begin = static_cast<int>(key_lo / kBlockN);
    n_end = static_cast<int>(key_hi / kBlockN) + 1;
  }
  {  // balanced: split s takes blocks [n * s / S, n * (s + 1) / S) of the n visible ones
    const int64_t n = n_end - n_begin;
    const int s_begin = n_begin + static_cast<int>(n * split / p.num_splits);
    n_end = n_begin + static_cast<int>(n * (split + 1) / p.num_splits);
    n_begin = s_begin;
  }
  const int n_tiles = n_end - n_begin;
  const int64_t full_lo = mask.lo(p_max);
  const int64_t full_hi = min(mask.hi(p_min), int64_t{sk} - 1);

  // ---- this thread's rows: g and g + 8 of each 16-row MMA tile
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

  const T* gQ = static_cast<const T*>(p.q);
  const KvT* gK = static_cast<const KvT*>(p.kv.k);
  const KvT* gV = static_cast<const KvT*>(p.kv.v);
  if constexpr (kFp8) {
    // Dim pairs into the slots that match K's fragment order (q_pair_slot, decode_fp8.cuh).
    constexpr int kPairs = kDqk / 2;
    for (int c = tid; c < kRows * kPairs; c += kThreads) {
      const int row = c / kPairs, w = c % kPairs;
      int tok, hg;
      p.group.divmod(row, tok, hg);
      const bool ok = row < rows_total;
      const T* src = ok ? gQ + b * p.q_batch_stride + int64_t{q_start + tok} * p.q_row_stride +
                              int64_t{hk * G + hg} * p.q_head_stride + 2 * w
                        : gQ;
      cp_async_4(smem_addr(sQ + row * kQS + (w / 8) * 16 + 2 * q_pair_slot(w % 8)), src, ok);
    }
  } else {
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
  }

  // ---- K/V stage loads. Thread chunk i of a stage covers key row (tid + i * kThreads) / kKC.
  constexpr int kKC = kDqk / kCE, kVC = kDv / kCE;
  constexpr int kKPer = (kBlockN * kKC + kThreads - 1) / kThreads;
  constexpr int kVPer = (kBlockN * kVC + kThreads - 1) / kThreads;
  // Contiguous and ragged KV: key j sits at a fixed row stride from key 0, so each of this
  // thread's chunks has a fixed offset within a block and a block adds j0 rows; computed once here,
  // that leaves a compare and an add per copy. (Paged KV looks each key row's page up.)
  const bool paged = p.kv.kind == KvKind::kPaged;
  // When kThreads is a multiple of the chunks per row, a thread's chunks sit at a fixed row step
  // (same column): one offset and one step then replace the array, registers the 8-warp tile needs.
  constexpr bool kKStep = kThreads % kKC == 0, kVStep = kThreads % kVC == 0;
  int64_t k_rel[kKStep ? 1 : kKPer], v_rel[kVStep ? 1 : kVPer];
  int64_t k_step = 0, v_step = 0;
  {
    int64_t k_seq = 0, v_seq = 0;
    if (!paged) {
      int64_t outer;
      int r0;
      p.kv.locate(b, kvs.start, 0, outer, r0);
      k_seq = p.kv.k_offset(outer, r0, hk);
      v_seq = p.kv.v_offset(outer, r0, hk);
    }
#pragma unroll
    for (int i = 0; i < (kKStep ? 1 : kKPer); ++i) {
      const int c = tid + i * kThreads;
      k_rel[i] = k_seq + (c / kKC) * p.kv.k_row_stride + (c % kKC) * kCE;
    }
#pragma unroll
    for (int i = 0; i < (kVStep ? 1 : kVPer); ++i) {
      const int c = tid + i * kThreads;
      v_rel[i] = v_seq + (c / kVC) * p.kv.v_row_stride + (c % kVC) * kCE;
    }
    if constexpr (kKStep) k_step = (kThreads / kKC) * p.kv.k_row_stride;
    if constexpr (kVStep) v_step = (kThreads / kVC) * p.kv.v_row_stride;
  }
  // FP8 per-token scales: thread sc_row + kBlockN * sc_v copies the scale of key sc_row of each
  // block, K's (sc_v = 0) or V's (1), into the stage; sc_seq: its element offset for key 0
  // (contiguous / ragged).
  const int sc_v = tid / kBlockN, sc_row = tid % kBlockN;
  const FwdParams::KvScale& sc_of = sc_v == 0 ? p.k_scale : p.v_scale;
  const bool sc_copy = kFp8 && sc_v < 2 && sc_of.per_token;
  int64_t sc_seq = 0;
  if (kFp8 && !paged) {
    int64_t outer;
    int r0;
    p.kv.locate(b, kvs.start, 0, outer, r0);
    sc_seq = outer * sc_of.outer_stride + int64_t{r0} * sc_of.row_stride + hk * sc_of.head_stride;
  }
  // Paged KV: for each of this thread's chunks of block n, K's then (when they cover other rows)
  // V's, the raw page-table entry and the row within the page (-1: past the sequence end). Read
  // an iteration before locate_block uses them, so the read's latency never delays the copies.
  // Threads of a warp mostly read the same entries.
  constexpr bool kSameRows = kKC == kVC;
  constexpr int kPgPer = kSameRows ? kKPer : kKPer + kVPer;
  struct PageRefs {
    int entry[kPgPer], row[kPgPer];
    int sc_entry, sc_row;  // FP8 per-token scale copy (sc_copy)
  };
  auto fetch_pages = [&](int n_block, PageRefs& pr) {
    const int j0 = n_block * kBlockN;
#pragma unroll
    for (int i = 0; i < kPgPer; ++i) {
      const bool is_k = i < kKPer;
      const int kc = is_k ? kKC : kVC;
      const int c = tid + (is_k ? i : i - kKPer) * kThreads;
      const int j = j0 + c / kc;
      pr.entry[i] = 0;
      pr.row[i] = -1;
      if (c < kBlockN * kc && j < sk) {
        int pi;
        p.kv.page_size.divmod(j, pi, pr.row[i]);
        pr.entry[i] = p.kv.page_entry(b, pi);
      }
    }
    pr.sc_entry = 0;
    pr.sc_row = -1;
    if (sc_copy && j0 + sc_row < sk) {
      int pi;
      p.kv.page_size.divmod(j0 + sc_row, pi, pr.sc_row);
      pr.sc_entry = p.kv.page_entry(b, pi);
    }
  };
  // Paged: offsets within a page in 32 bits, and one wide multiply-add of the page onto them (the
  // plan checks that every K / V stride and in-page offset fits: paged_offsets_fit_32,
  // portable_dispatch.cu). In 64 bits this arithmetic made the paged kernel execute half again
  // as many instructions as the contiguous one, which held its bandwidth down.
  auto paged_offset = [&](int entry, int row, int col, int64_t outer, int64_t row_stride,
                          int64_t head_stride) -> int64_t {
    const uint32_t in_page = static_cast<uint32_t>(row) * static_cast<uint32_t>(row_stride) +
                             static_cast<uint32_t>(hk) * static_cast<uint32_t>(head_stride) +
                             static_cast<uint32_t>(col);
    const uint32_t page = static_cast<uint32_t>(p.kv.clamp_page(entry));
    return static_cast<int64_t>(uint64_t{page} * static_cast<uint32_t>(outer) + in_page);
  };
  // Element offsets of this thread's chunks for block n (-1: past the sequence end), and of its
  // scale copy (sc_off, FP8 per-token; -1: none); pr: the block's page references (paged only).
  auto locate_block = [&](int n_block, const PageRefs& pr, int64_t(&k_off)[kKPer],
                          int64_t(&v_off)[kVPer], int64_t& sc_off) {
    const int j0 = n_block * kBlockN;
    sc_off = -1;
    if (sc_copy) {
      if (!paged && j0 + sc_row < sk)
        sc_off = sc_seq + int64_t{j0 + sc_row} * sc_of.row_stride;
      if (paged && pr.sc_row >= 0)
        sc_off = int64_t{p.kv.clamp_page(pr.sc_entry)} * sc_of.outer_stride +
                 int64_t{pr.sc_row} * sc_of.row_stride + hk * sc_of.head_stride;
    }
    if (!paged) {
      const int64_t k_blk = int64_t{j0} * p.kv.k_row_stride, v_blk = int64_t{j0} * p.kv.v_row_stride;
#pragma unroll
      for (int i = 0; i < kKPer; ++i) {
        const int c = tid + i * kThreads;
        const int64_t rel = kKStep ? k_rel[0] + i * k_step : k_rel[kKStep ? 0 : i];
        k_off[i] = c < kBlockN * kKC && j0 + c / kKC < sk ? rel + k_blk : -1;
      }
#pragma unroll
      for (int i = 0; i < kVPer; ++i) {
        const int c = tid + i * kThreads;
        const int64_t rel = kVStep ? v_rel[0] + i * v_step : v_rel[kVStep ? 0 : i];
        v_off[i] = c < kBlockN * kVC && j0 + c / kVC < sk ? rel + v_blk : -1;
      }
      return;
    }
    // Paged: the page references were fetched an iteration earlier (fetch_pages).
    const KvOperand& kv = p.kv;
#pragma unroll
    for (int i = 0; i < kKPer; ++i) {
      const int col = ((tid + i * kThreads) % kKC) * kCE;
      const bool ok = pr.row[i] >= 0;
      k_off[i] = ok ? paged_offset(pr.entry[i], pr.row[i], col, kv.k_outer_stride, kv.k_row_stride,
                                   kv.k_head_stride)
                    : -1;
      if constexpr (kSameRows)
        v_off[i] = ok ? paged_offset(pr.entry[i], pr.row[i], col, kv.v_outer_stride,
                                     kv.v_row_stride, kv.v_head_stride)
                      : -1;
    }
    if constexpr (!kSameRows) {
#pragma unroll
      for (int i = 0; i < kVPer; ++i) {
        const int col = ((tid + i * kThreads) % kVC) * kCE;
        v_off[i] = pr.row[kKPer + i] >= 0
                       ? paged_offset(pr.entry[kKPer + i], pr.row[kKPer + i], col,
                                      kv.v_outer_stride, kv.v_row_stride, kv.v_head_stride)
                       : -1;
      }
    }
  };
  const typename Tile::KvL2::Policy kv_l2 = Tile::KvL2::make();
  auto issue_block = [&](int stage, const int64_t(&k_off)[kKPer], const int64_t(&v_off)[kVPer],
                         int64_t sc_off) {
    KvT* dK = sK + stage * kBlockN * kKS;
    KvT* dV = sV + stage * kBlockN * kVS;
    if (sc_copy) {
      const bool ok = sc_off >= 0;
      cp_async_4(smem_addr(sScale + (stage * 2 + sc_v) * kBlockN + sc_row),
                 ok ? sc_of.data + sc_off : sc_of.data, ok);
    }
#pragma unroll
    for (int i = 0; i < kKPer; ++i) {
      const int c = tid + i * kThreads;
      if (c < kBlockN * kKC) {
        const int row = c / kKC, col = (c % kKC) * kCE;
        const bool ok = k_off[i] >= 0;
        Tile::KvL2::copy(kv_l2, smem_addr(dK + row * kKS + col), ok ? gK + k_off[i] : gK, ok);
      }
    }
#pragma unroll
    for (int i = 0; i < kVPer; ++i) {
      const int c = tid + i * kThreads;
      if (c < kBlockN * kVC) {
        const int row = c / kVC, col = (c % kVC) * kCE;
        const bool ok = v_off[i] >= 0;
        Tile::KvL2::copy(kv_l2, smem_addr(dV + row * kVS + col), ok ? gV + v_off[i] : gV, ok);
      }
    }
  };

  // pg_next: the page references of the next block to locate (paged only).
  PageRefs pg_next;
#pragma unroll
  for (int i = 0; i < kPgPer; ++i) pg_next.entry[i] = pg_next.row[i] = 0;
  pg_next.sc_entry = pg_next.sc_row = 0;
  {
    // Every stage is filled here, not kStages - 1 of them as the loop keeps in flight later: all
    // stages are free before the first compute, and a split of at most kStages blocks (batch 1 x
    // 1k keys: two) then costs one DRAM round trip instead of two. All page-table reads of the
    // prologue (and the first refill's) first, so that they overlap instead of each one delaying
    // its stage's copies.
    PageRefs pg[kStages];
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
#pragma unroll
      for (int i = 0; i < kPgPer; ++i) pg[s].entry[i] = pg[s].row[i] = 0;
      pg[s].sc_entry = pg[s].sc_row = 0;
    }
    if (paged) {
#pragma unroll
      for (int s = 0; s < kStages; ++s)
        if (s < n_tiles) fetch_pages(n_begin + s, pg[s]);
      if (kStages < n_tiles) fetch_pages(n_begin + kStages, pg_next);
    }
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < n_tiles) {
        int64_t pk[kKPer], pv[kVPer], ps;
        locate_block(n_begin + s, pg[s], pk, pv, ps);
        issue_block(s, pk, pv, ps);
      }
      cp_async_commit();  // group 0 also carries Q
    }
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
  // A (16 x 16 at rows r0, cols c0): matrices (r0, c0) (r0+8, c0) (r0, c0+8) (r0+8, c0+8).
  const uint32_t q_lane = smem_addr(sQ + ((mi & 1) * 8 + mr) * kQS + (mi >> 1) * 8);
  // K as B (n x k row-major): (n0, k0) (n0, k0+8) (n0+8, k0) (n0+8, k0+8); FP8: 16 keys x 32 dims
  // (decode_fp8_layout.h).
  const int k_lane_off = kFp8 ? (kh * 16 + fp8_k_lane_key(lane)) * kKS + fp8_k_lane_byte(lane)
                              : (kh * 16 + (mi >> 1) * 8 + mr) * kKS + (mi & 1) * 8;
  // V as B via .trans (k x n row-major): (k0, n0) (k0+8, n0) (k0, n0+8) (k0+8, n0+8); FP8: 16 keys
  // x 32 dims (decode_fp8_layout.h).
  const int v_lane_off =
      kFp8 ? (kh * 16 + fp8_v_lane_key(lane)) * kVS + dh * kDvWarp + fp8_v_lane_byte(lane)
           : (kh * 16 + (mi & 1) * 8 + mr) * kVS + dh * kDvWarp + (mi >> 1) * 8;
  // FP8: the scales of this KV head (per tensor / per KV head; 1 when per token, which the
  // stages carry). K's multiplies the scores, with the factor that undoes bf16 queries' scaling
  // into fp16 (q_unscale); V's multiplies O at the end.
  float q_unscale = 1.f, k_scale_head = 1.f, v_scale_head = 1.f;
  if constexpr (kFp8) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      cp_async_wait<kStages - 1>();  // group 0: Q (and the first stage)
      __shared__ unsigned q_amax_bits;
      q_unscale = fp8_q_bf16_to_half<kRows, kDqk, kQS, kThreads>(sQ, &q_amax_bits);
    }
    k_scale_head = q_unscale;
    if (!p.k_scale.per_token) k_scale_head *= __ldg(p.k_scale.data + hk * p.k_scale.head_stride);
    if (!p.v_scale.per_token) v_scale_head = __ldg(p.v_scale.data + hk * p.v_scale.head_stride);
  }

  constexpr int kQFrags = Tile::kQInRegs ? kDqk / 16 : 1;
  uint32_t qf[kMT][kQFrags][4];

  for (int t = 0; t < n_tiles; ++t) {
    // Block t's group is t. Committed so far: the prologue's kStages, then one per iteration from
    // iteration 1 on (iteration 0 has no stage to refill).
    if (t == 0)
      cp_async_wait<kStages - 1>();
    else
      cp_async_wait<kStages - 2>();
    __syncthreads();
    // The stage refilled here was last read in iteration t - 1, which every thread has left. Its
    // page-table entries were read an iteration ago; the next block's are read now, and this
    // iteration's compute hides their latency.
    if (t > 0) {
      const int t_next = t + kStages - 1;
      if (t_next < n_tiles) {
        int64_t k_off[kKPer], v_off[kVPer], sc_off;
        locate_block(n_begin + t_next, pg_next, k_off, v_off, sc_off);
        issue_block(t_next % kStages, k_off, v_off, sc_off);
      }
      if (paged && t_next + 1 < n_tiles) fetch_pages(n_begin + t_next + 1, pg_next);
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
    const int stage = t % kStages;
    const uint32_t k_base = smem_addr(sK + stage * kBlockN * kKS + k_lane_off);
    const uint32_t v_base = smem_addr(sV + stage * kBlockN * kVS + v_lane_off);

    // ---- S = Q K^T over this warp's 16 keys
    float s[kMT][2][4];
    auto q_frag = [&](int mt, int kk, uint32_t(&a)[4]) {
      if constexpr (Tile::kQInRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) a[e] = qf[mt][kk][e];
      } else {
        ldmatrix_x4(q_lane + (mt * 16 * kQS + kk * 16) * 2, a);
      }
    };
    if constexpr (kFp8) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.f;
#pragma unroll
      for (int kk2 = 0; kk2 < kDqk / 32; ++kk2) {
        uint32_t rk[4];  // keys 0-7 | 8-15 (x) dims 0-15 | 16-31 of the two slabs
        ldmatrix_x4(k_base + kk2 * 32, rk);
#pragma unroll
        for (int sl = 0; sl < 2; ++sl) {
          uint32_t b[2][2];
          fp8_k_fragment(rk[sl], b[0][0], b[0][1]);
          fp8_k_fragment(rk[2 + sl], b[1][0], b[1][1]);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            uint32_t a[4];
            q_frag(mt, 2 * kk2 + sl, a);
            MmaOp<MmaT>::run(s[mt][0], a, b[0][0], b[0][1]);
            MmaOp<MmaT>::run(s[mt][1], a, b[1][0], b[1][1]);
          }
        }
      }
    } else {
      decode_qk<T, kMT, kDqk>([&](int kk) { return k_base + kk * 32; }, q_frag, s);
    }
    // FP8: this thread's keys (2t, 2t+1) and (2t+8, 2t+9) of its key group, K's and V's scales
    float2 ks[2] = {make_float2(k_scale_head, k_scale_head), make_float2(k_scale_head, k_scale_head)};
    float2 vs[2] = {make_float2(1.f, 1.f), make_float2(1.f, 1.f)};
    if constexpr (kFp8) {
      const float* sc = sScale + stage * 2 * kBlockN + kh * 16 + (lane % 4) * 2;
      if (p.k_scale.per_token) {
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const float2 k = *reinterpret_cast<const float2*>(sc + 8 * n);
          ks[n] = make_float2(k.x * q_unscale, k.y * q_unscale);
        }
      }
      if (p.v_scale.per_token) {
        vs[0] = *reinterpret_cast<const float2*>(sc + kBlockN);
        vs[1] = *reinterpret_cast<const float2*>(sc + kBlockN + 8);
      }
    }

    // ---- score mod, mask, online softmax (log2 units)
    const int j0 = (n_begin + t) * kBlockN;
    const bool full = full_lo <= j0 && j0 + kBlockN - 1 <= full_hi;
    const int jl = j0 + kh * 16 + (lane % 4) * 2;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = mt * 2 + (e >> 1);
          const int j = jl + n * 8 + (e & 1);
          float x = s[mt][n][e];
          if constexpr (kFp8) x *= (e & 1) ? ks[n].y : ks[n].x;
          x = mod.apply(x, mrow[i], row_p[i], j);
          if (!full && (j < row_lo[i] || j > row_hi[i])) x = -INFINITY;
          s[mt][n][e] = x;
        }
    decode_online_softmax(s, m_run, l_run, acc);

    // ---- O += P V over this warp's 16 keys and Dv half. FP8 per-token V scales multiply P (the
    // row sums l above are P's own).
    if constexpr (kFp8) {
      if (p.v_scale.per_token) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][n][e] *= (e & 1) ? vs[n].y : vs[n].x;
      }
    }
    uint32_t pa[kMT][4];
    decode_pack_p<MmaT>(s, pa);
    if constexpr (kFp8) {
      // n-block 2c of acc: the even dims of 16-dim chunk c, 2c + 1: its odd dims (decode_fp8.cuh)
#pragma unroll
      for (int cc = 0; cc < kDvWarp / 32; ++cc) {
        uint32_t rv[4];  // keys 0-7 | 8-15 (x) chunks 2cc | 2cc + 1
        ldmatrix_x4_trans(v_base + cc * 32, rv);
#pragma unroll
        for (int ch = 0; ch < 2; ++ch) {
          uint32_t even[2], odd[2];
          fp8_v_pairs(rv[2 * ch], rv[2 * ch + 1], even, odd);
          const int c = 2 * cc + ch;
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            MmaOp<MmaT>::run(acc[mt][2 * c], pa[mt], even[0], even[1]);
            MmaOp<MmaT>::run(acc[mt][2 * c + 1], pa[mt], odd[0], odd[1]);
          }
        }
      }
    } else {
      decode_pv<T, kMT, kDvWarp>([&](int nn) { return v_base + nn * 32; }, pa, acc);
    }
  }
  cp_async_wait<0>();  // nothing may still be landing in shared memory
  __syncthreads();     // every warp is done with the stages, which the merge reuses

  // ---- merge the key groups through shared memory, then store
  float* red = reinterpret_cast<float*>(sK);
  float* red_o = red;                       // [kKG][kRows][kDv]
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
    if constexpr (kFp8) {  // n-blocks 2c / 2c + 1: even / odd dims of chunk c
#pragma unroll
      for (int c = 0; c < kDvWarp / 16; ++c) {
        static_assert(fp8_o_dim(1, 0, 0) == 4 && fp8_o_dim(0, 0, 1) == 1 && fp8_o_dim(0, 1, 0) == 2,
                      "the float4 below holds dims 4t .. 4t+3: (even, odd) x (e, e + 1)");
        const int col = dh * kDvWarp + c * 16 + fp8_o_dim(lane % 4, 0, 0);
        const float* ev = acc[mt][2 * c];
        const float* od = acc[mt][2 * c + 1];
        *reinterpret_cast<float4*>(red_o + (kh * kRows + rr) * kDv + col) =
            make_float4(ev[2 * h] * v_scale_head, od[2 * h] * v_scale_head,
                        ev[2 * h + 1] * v_scale_head, od[2 * h + 1] * v_scale_head);
      }
    } else {
      decode_stash_o<kRows, kDv, kDvWarp>(red, i, rr, kh, dh, lane, acc);
    }
  }
  __syncthreads();
  decode_store<Tile, T>(p, red, rows_total, b, hk, q_start, split);
  if (p.num_splits > 1) decode_merge_if_last<Tile, T>(p, rows_total, b, hk, q_start);
}

}  // namespace attnkit::gpu
