// Stages 4 and 5 fused on Hopper (sm_90a): the sequential state pass with the chunk output, on
// WGMMA with TMA loads (the kernel; gdn_state_output_sm90_launch.cuh launches it,
// state_output_sm90.cu dispatches). Same result as gdn_state_output.cuh (the mma.sync version,
// which other GPUs run, on W and U from the intra stage), in another order:
//   v_new = U - W S = T diag(beta) V - T diag(beta exp(g)) K S = C (V - diag(exp(g)) K S)
// with C = T diag(beta), the one matrix the intra stage hands over. Per chunk the chain is
// X = K S_hi, R = V - diag(exp(g)) X (16 bits), v_new = C R, the update; not W S_hi behind
// W = T diag(beta exp(g)) K and U = T diag(beta) V, built here each chunk from the intra stage's
// [C | C diag(exp(g))]: without them the tensor cores do a third less a chunk and the intra stage
// writes half the coefficients, with this kernel as fast as before.
// R is rounded to 16 bits after the cancellation V - exp(g) X, where W S used to be rounded
// before it: o's relative L2 against the fp32 recurrence 2.91e-3, the final state's 1.67e-3 at
// T = 16k (fla 3.33e-3 / 2.50e-3), as with W and U.
// Other roundings to 16 bits instead of hi + lo halves, each measured faster: S in every product
// with S (S_hi), ṽ in the update S += Kᵀ ṽ (the final state's error 1.67e-3 -> 1.91e-3 at 16k;
// fla rounds ṽ too), Q S without S_lo (o unchanged at 2.9e-3).
//
// One CTA per (sequence, value head, kCols-column slice of V: 32, or 64 in the wide variant),
// three warpgroups; the CTAs of a (sequence, value head) may form a cluster that shares the
// q/k-head tiles through TMA multicast. Below, 32 stands for kCols.
// - WG2, producer: one thread walks the sequence's chunks and issues the TMA loads of each chunk's
//   C (from the intra stage), Kᵀ, Q, P (whole tiles, each cluster CTA loading its share), the CTA's
//   64 x 32 slice of V and the chunk's gates into a kStages-deep ring (full barriers carry the
//   transaction bytes; every consumer warp of the cluster releases a stage through its empty
//   barriers).
// - WG0, state: holds S (128 keys x 32 values) in fp32 WGMMA accumulators. Per chunk:
//     X = K S_hi (64 x 32, 8 WGMMAs over the keys; A = the Kᵀ tile read as K, the same bytes);
//     R = V - diag(exp(g)) X in 16 bits, into ṽ's buffer (V's pairs read under X's latency);
//     v_new = C R (4 WGMMAs over the chunk's rows);
//     ṽ = diag(exp(g_last - g)) v_new in 16 bits (v_new too, for WG1, over the stage's V slice);
//     S = exp(g_last) S + Kᵀ ṽ (M = 128 keys: 2 x 4 WGMMAs, A = Kᵀ MN-major);
//     S_hi of the new state published for the next chunk.
//   Each WGMMA spans the warpgroup (no cross-warp reduction). The epilogues are on the critical
//   path, so they use stmatrix or shared-window offsets computed once and 16-bit pairs; S's decay
//   runs under X's latency (these placements measured faster).
// - WG1, output: O = scale (diag(exp(g)) Q S_hi + P v_new). Q S starts once X has completed
//   (kBarX, which the state warpgroup arrives at without waiting), so that the chain's first product
//   does not share the tensor cores with it: Q S runs while R is formed (measured faster). P v_new
//   runs while WG0 updates S. Whole chunks go to shared memory (stmatrix) and out by TMA, each
//   warp storing its 16 rows (so_store_output); a sequence's last partial chunk, or an o whose rows
//   are not 16-byte aligned, is stored from registers (rows < len). Storing by TMA measured faster
//   than from registers, as did a store per warp, the narrow CTA's own double-buffered staging
//   tile (the stage released once P v_new has completed) and the row scales computed under Q S.
// Hand-offs: named barrier kBarS (S of chunk c published; WG1 done with chunk c - 1), kBarX (X of
// chunk c completed) and kBarV (ṽ and v_new written; WG1 done with Q S of chunk c), once per
// chunk, so S, ṽ and v_new need one buffer each. Other schedules (the chain a chunk ahead, other
// hand-offs, this kernel beside the intra kernel on the same SMs) measured slower
// (docs/decisions.md).
// Rows past a sequence's last chunk end are loaded too (the next sequence's rows, or zeros past
// the tensor's end): C, Q, P and g rows only reach rows that are never stored or are selected
// away (C's rows < len are zero past the diagonal); the state warpgroup zeroes Kᵀ columns and V
// rows past len in shared memory, since X's rows there then are 0 and R's rows meet zero
// coefficients, and 0 x NaN need not be 0.
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>

#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "attnkit/status.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/named_barrier.cuh"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda::sm90 {

using namespace cute;

template <class E, int kCluster_, int kCols_ = 32, int kStages_ = 3>
struct SoCfg {
  using Element = E;
  static constexpr int kStages = kStages_;
  // Value columns per CTA: 32 (4 CTAs per (sequence, value head)) or 64 (2, "wide"). A step of the
  // chain is latency-bound, so a wide CTA takes less than twice as long per chunk as a narrow one
  // for twice the columns: wide pays when the narrow CTAs would not all fit on the device at once
  // (measured on 8 uneven sequences).
  static constexpr int kCols = kCols_;
  static_assert(kCols == 32 || kCols == 64);
  using NC = Int<kCols>;
  // 16-bit tiles kCols wide along their contiguous mode: one swizzle row of 64 or 128 bytes.
  using AtomColsK = std::conditional_t<kCols == 32, GMMA::Layout_K_SW64_Atom<E>, GMMA::Layout_K_SW128_Atom<E>>;
  using AtomColsMN = std::conditional_t<kCols == 32, GMMA::Layout_MN_SW64_Atom<E>, GMMA::Layout_MN_SW128_Atom<E>>;
  // CTAs of one (sequence, value head) in a cluster: each loads 1/kCluster of the shared tiles
  // (C, Kᵀ, Q, P) and multicasts it to all of them. At most two: clusters of all four narrow CTAs
  // of a value head do not all fit on the device at once at T = 16k (measured far slower).
  static constexpr int kCluster = kCluster_;
  static_assert(kCluster == 1 || kCluster == 2);
  static constexpr int kThreads = 384;
  // The state warpgroup's 16-bit stores (S_hi, R, ṽ, v_new) by stmatrix, or by 4-byte pair stores at
  // precomputed addresses: stmatrix measured faster for the narrow kernel, slower for the wide one.
  static constexpr bool kStsm = kCols == 32;
  // setmaxnreg budgets: the CTA starts with 168 registers per thread; the producer and the output
  // warpgroup (two 64 x kCols accumulators) give back what the state warpgroup may take beyond
  // that (accumulators S 128 x kCols, X and VN 64 x kCols). Tuned when the state warpgroup also
  // held W's 64 x 128 accumulator; not retuned since.
  static constexpr int kProducerRegs = 24;
  static constexpr int kStateRegs = kCols == 32 ? 240 : 256;
  static constexpr int kOutputRegs = kCols == 32 ? 104 : 152;
  static_assert(kProducerRegs + kStateRegs + kOutputRegs <= 65536 / 128);
  // (row, key) tiles, keys contiguous: Q, the K-major A operand of Q S, and K for X = K S (the Kᵀ
  // tile's bytes: tests/layout checks that LayKt (k, r) is LayRowsD (r, k)).
  using LayRowsD = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, _128>{}));
  // Kᵀ as (key, row), keys contiguous: the MN-major A operand of Kᵀ ṽ.
  // Atoms (64 keys x 8 rows) stacked along the rows first, so that a 64-key slab is one TMA box
  // (stacked along the keys first, a box spans 8 rows: 16 TMA loads per tile).
  using LayKt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<E>{}, Shape<_128, _64>{}, Step<_2, _1>{}));
  // P and C (i, j), j contiguous: K-major A of P v_new and of C R.
  using LayP = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, _64>{}));
  // The CTA's 64 x kCols slice of V, as (row, value); the output tile too.
  using LayU = decltype(tile_to_shape(AtomColsK{}, Shape<_64, NC>{}));
  // A warp's 16 rows of the output tile (whole swizzle atoms: a contiguous quarter of LayU), the
  // box of its TMA store.
  using LayO16 = decltype(tile_to_shape(AtomColsK{}, Shape<_16, NC>{}));
  // Whole chunks' outputs are staged in a double-buffered tile of their own (narrow: it fits),
  // so that the output warpgroup releases the stage once P v_new has completed and never waits
  // for a TMA store; the wide CTA stages them over the stage's Q tile (Q S has consumed it) and
  // releases the stage once its store has read it.
  static constexpr bool kOwnOutTile = kCols == 32;
  // Gates of 4 heads (the 16-byte aligned group holding this one) x 64 rows.
  using LayG = Layout<Shape<_4, _64>>;
  // S_hi as (value, key), values contiguous: MN-major B of X = K S_hi and Q S_hi.
  using LayS = decltype(tile_to_shape(AtomColsMN{}, Shape<NC, _128>{}));
  // ṽ as (value, row): MN-major B of Kᵀ ṽ.
  using LayVt = decltype(tile_to_shape(AtomColsMN{}, Shape<NC, _64>{}));
  // v_new, and the V slice, as (value, row) (the bytes of LayU): MN-major B of P v_new; R (in
  // ṽ's buffer): MN-major B of C R.
  using LayVn = decltype(tile_to_shape(AtomColsMN{}, Shape<NC, _64>{}));

  // Q S_hi and X = K S_hi (rows x values over the 128 keys).
  using MmaRowsS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, NC, _128>, GMMA::Major::K, GMMA::Major::MN>()));
  // v_new = C R and P v_new (rows x values over the chunk's 64 rows).
  using MmaRowsC = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, NC, _64>, GMMA::Major::K, GMMA::Major::MN>()));
  using MmaKeys = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, NC, _64>, GMMA::Major::MN, GMMA::Major::MN>()));

  // Global tensors as TMA sees them: (rows, D, heads, batch) with D contiguous; Kᵀ as (D, rows,
  // heads, batch); gates (padded heads, rows, batch) with heads contiguous.
  template <int D>
  using ShapeRows = Shape<int32_t, Int<D>, int32_t, int32_t>;
  using StrideRows = Stride<int64_t, _1, int64_t, int64_t>;
  using ShapeT = Shape<_128, int32_t, int32_t, int32_t>;
  using StrideT = Stride<_1, int64_t, int64_t, int64_t>;
  using ShapeG = Shape<int32_t, int32_t, int32_t>;
  using StrideG = Stride<_1, int64_t, int64_t>;
  template <int D>
  using GRows = decltype(make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)), ShapeRows<D>{}, StrideRows{}));

  using SharedLoad = std::conditional_t<kCluster == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  using TmaRows = decltype(make_tma_copy(SharedLoad{}, GRows<128>{}, LayRowsD{}, Int<kCluster>{}));
  using TmaV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GRows<128>{}, LayU{}));
  // C and P: 64 x 64 tiles.
  using TmaP = decltype(make_tma_copy(SharedLoad{}, GRows<64>{}, LayP{}, Int<kCluster>{}));
  using TmaKt = decltype(make_tma_copy(
      SharedLoad{}, make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)), ShapeT{}, StrideT{}), LayKt{},
      Int<kCluster>{}));
  // A warp's 16 x kCols of the output tile, stored by TMA.
  using TmaO = decltype(make_tma_copy(
      SM90_TMA_STORE{},
      make_tensor(make_gmem_ptr(static_cast<E*>(nullptr)), ShapeRows<128>{}, StrideRows{}), LayO16{}));
  using TmaG = decltype(make_tma_copy(
      SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(static_cast<float const*>(nullptr)), ShapeG{}, StrideG{}), LayG{}));

  static constexpr uint32_t kStageBytes =
      (2 * 64 * 128 + 2 * 64 * 64 + 64 * kCols) * sizeof(E) + 4 * 64 * sizeof(float);
};

// The output warpgroup's own staging tiles (Cfg::kOwnOutTile), or none.
template <class E, int kCols, bool kOwn>
struct SoOutTiles {
  cute::array_aligned<E, 64 * kCols, 1024> t[2];
};
template <class E, int kCols>
struct SoOutTiles<E, kCols, false> {};

template <class Cfg>
struct SoSmem {
  using E = typename Cfg::Element;
  static constexpr int S = Cfg::kStages;
  // The ring: what the producer loads per chunk.
  cute::array_aligned<E, 64 * 64, 1024> t[S];  // C = T diag(beta)
  cute::array_aligned<E, 64 * 128, 1024> kt[S];
  cute::array_aligned<E, 64 * 128, 1024> q[S];
  cute::array_aligned<E, 64 * 64, 1024> p[S];
  // The CTA's V slice, then v_new in its place: the state warpgroup has read V (for R) when it
  // writes v_new.
  cute::array_aligned<E, Cfg::kCols * 64, 1024> v[S];
  cute::array_aligned<float, 4 * 64, 128> g[S];
  cute::array_aligned<E, Cfg::kCols * 128, 1024> s_hi;  // S rounded to 16 bits
  cute::array_aligned<E, Cfg::kCols * 64, 1024> vt;     // ṽ (LayVt, the layout of v_new)
  SoOutTiles<E, Cfg::kCols, Cfg::kOwnOutTile> out;
  alignas(8) uint64_t full[S];
  alignas(8) uint64_t empty[S];
};

template <class Cfg>
struct SoParams {
  typename Cfg::TmaRows tma_q;
  typename Cfg::TmaP tma_t;
  typename Cfg::TmaV tma_v;
  typename Cfg::TmaP tma_p;
  typename Cfg::TmaKt tma_kt;
  typename Cfg::TmaG tma_g;
  int rows, batches, H, HV, group, heads_g;
  SeqLayout L;
  typename Cfg::Element* o;
  int64_t o_sb, o_st, o_sh;
  int o_pair;  // 1: o takes 4-byte stores of adjacent values
  typename Cfg::TmaO tma_o;
  int o_tma;  // 1: whole chunks' outputs go out by TMA (o's rows 16-byte aligned)
  StateT init, fin;
  float scale;
};

// 32-bit shared-memory stores by shared-window address: the epilogues use offsets computed once
// per thread (CuTe's swizzled indexing through generic pointers cost ~100 instructions per element
// on the chunk loop's critical path).
CUTE_DEVICE void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
CUTE_DEVICE uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
// A pair of 16-bit values (E) in one 32-bit word, as floats.
template <class E>
CUTE_DEVICE void unpack2f(uint32_t v, float* lo, float* hi) {
  E a, b;
  reinterpret_cast<uint16_t&>(a) = static_cast<uint16_t>(v & 0xffffu);
  reinterpret_cast<uint16_t&>(b) = static_cast<uint16_t>(v >> 16);
  *lo = static_cast<float>(a);
  *hi = static_cast<float>(b);
}
template <class E>
CUTE_DEVICE uint32_t pack2f(float lo, float hi);
template <>
CUTE_DEVICE uint32_t pack2f<cutlass::bfloat16_t>(float lo, float hi) {
  const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&x);
}
template <>
CUTE_DEVICE uint32_t pack2f<cutlass::half_t>(float lo, float hi) {
  const __half2 x = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&x);
}
// One WGMMA batch acc = A B (this warpgroup's tile; A, B partitioned fragments, k-blocks in mode
// 2), committed, not waited for.
template <class Mma, class Acc, class A, class B>
CUTE_DEVICE void wg_issue(Mma& mma, Acc& acc, const A& a, const B& b) {
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    gemm(mma, a(_, _, kb), b(_, _, kb), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}
template <class T>
CUTE_DEVICE uint32_t smem_off(const T* p, const void* base) {
  return cute::cast_smem_ptr_to_uint(p) - cute::cast_smem_ptr_to_uint(base);
}

constexpr int kBarS = 1;        // S of the chunk published (state and output warpgroups)
constexpr int kBarV = 2;        // ṽ and v_new written; the output warpgroup done with Q S
constexpr int kBarStateWg = 3;  // the state warpgroup's own: rows past len zeroed, R stored
constexpr int kBarX = 4;        // X of the chunk completed (the state warpgroup arrives, the output waits)
constexpr int kConsumerThreads = 256;  // the two warpgroups at kBarS and kBarV
constexpr int kConsumerWarps = 8;      // state and output: each releases every stage

// N below is the CTA's value columns (kCols). A thread's pair (r, b, m) of an accumulator holds
// columns 8 b + 2 (lane % 4) + {0, 1} of row 8 r + 64 m (+ the warp's and lane's offset); in the
// 16-bit tiles (LayS, LayVt: N values x 8 rows per swizzle atom, 16 N bytes) the row's atom is an
// immediate, the column block's swizzled position is not: one base address per b.
// The state warpgroup's column pairs: pair q (0 to N / 2 - 1) of its 128 x N S accumulator
// (columns c, c + 1) is elements (so_pair_elem(q), + 1).
template <int N>
constexpr int so_pair_elem(int q) {
  return 2 * (q % (N / 4)) + (N / 2) * (q / (N / 4));
}
// Where pair q goes in S_hi (LayS): so_s_hi_imm(q) bytes past the address of pair
// 2 so_s_hi_base(q), in every thread, so the publish stores at N / 8 bases + immediates. Base b
// is pair 0's address XOR 16 b (the swizzle XORs the 16-byte column block with the row, whose
// bits pair 0's address holds): one instruction from one register, where N / 8 live registers
// were rematerialised from the swizzle (~5 instructions each) under the wide variant's register
// pressure. tests/layout/gdn_state_output_sm90_layout_test.cu checks all this against CuTe.
template <int N>
constexpr int so_s_hi_base(int q) {
  return (q >> 1) % (N / 8);
}
template <int N>
constexpr uint32_t so_s_hi_imm(int q) {
  return 16u * N * (q & 1) + 128u * N * (q / (N / 4));
}
// The VN pairs: pair q (0 to N / 4 - 1) of the 64 x N VN accumulator is elements (2 q, 2 q + 1);
// in ṽ (LayVt) it goes so_vt_imm(q) bytes past pair q & ~1 (the thread's second row is 8 rows
// on). v_new (LayVn, the same layout) goes to the same offset in the stage's V tile. Checked by the
// same host test.
template <int N>
constexpr uint32_t so_vt_imm(int q) {
  return 16u * N * (q & 1);
}
// Base b's address from pair 0's (S_hi and ṽ alike).
constexpr uint32_t so_base(uint32_t pair0, int b) { return pair0 ^ (16u * static_cast<uint32_t>(b)); }

// The accumulator fragments here are ((2, 2, N/8), MMA_M, 1), compact: element
// e + 4 blk + (N / 2) m holds column 8 blk + 2 t + (e & 1) of row block m.
template <class Frag>
CUTE_DEVICE void check_acc_layout(const Frag& f) {
  static_assert(decltype(stride<0, 0>(f.layout()))::value == 1 && decltype(stride<0, 1>(f.layout()))::value == 2 &&
                    decltype(stride<0, 2>(f.layout()))::value == 4,
                "accumulator must be compact");
}

// A warpgroup's 16-bit tile r (in the order of the accumulators of mma) to dst, a shared-memory
// tensor of the accumulators' (row, column) shape whose rows are 16-byte runs, by stmatrix.
template <class Mma, class Frag, class Dst>
CUTE_DEVICE void stsm_store(const Mma& mma, int tidx, const Frag& r, Dst&& dst) {
  auto stsm = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, typename Frag::value_type>{}, mma);
  auto thr = stsm.get_thread_slice(tidx);
  copy(stsm, thr.retile_S(r), thr.partition_D(dst));
}

// The output warpgroup's chunk epilogue: O = scale (exp(g) Q S_hi + P v_new) for the chunk's rows
// row0 .. row0 + len - 1 from its accumulators (element i of accO and of accPV hold the same (row,
// column); ex_a, ex_b: scale exp(g) of the thread's two rows), chunk ci in stage s, which it
// releases (release(s)) as early as it may.
// Whole chunks go to shared memory (stmatrix) and out by TMA, each warp storing its own 16 rows
// (no barrier across the warpgroup): into the chunk's own staging tile (Cfg::kOwnOutTile: the
// stage is released first, P v_new having been its last reader here), or over the stage's Q
// tile, which Q S has consumed, each warp releasing the stage once its store has read it. A
// sequence's last partial chunk, or an o whose rows are not 16-byte aligned, is stored from
// registers (rows < len).
template <class Cfg, class MmaPV, class AccO, class AccPV, class Release>
CUTE_DEVICE void so_store_output(const SoParams<Cfg>& p, SoSmem<Cfg>& ss, int ci, int s, const MmaPV& mma_pv,
                                 const AccO& accO, const AccPV& accPV, int tidx, int row_a, int row_b, float ex_a,
                                 float ex_b, int64_t row0, int len, int hv, int batch, int v0, Release&& release) {
  using E = typename Cfg::Element;
  constexpr int kCols = Cfg::kCols;
  constexpr bool kOwn = Cfg::kOwnOutTile;
  using NC = typename Cfg::NC;
  auto value = [&](int i) {
    const float ex = (i & 2) ? ex_b : ex_a;
    return ex * accO(i) + p.scale * accPV(i);
  };
  const int lane = tidx % 32, warp = tidx / 32;
  if constexpr (kOwn) release(s);
  if (p.o_tma && len == kChunk) {
    E* tile;
    if constexpr (kOwn) {
      tile = ss.out.t[ci & 1].data();
      // Wait until the store that last read this tile (chunk ci - 2, issued by this warp's lane 0) has read it.
      if (lane == 0) cute::tma_store_wait<1>();
      __syncwarp();
    } else {
      tile = ss.q[s].data();
    }
    Tensor rO = make_tensor_like<E>(accPV);
    CUTE_UNROLL
    for (int i = 0; i < size(rO); ++i) rO(i) = static_cast<E>(value(i));
    stsm_store(mma_pv, tidx, rO, make_tensor(make_smem_ptr(tile), typename Cfg::LayU{}));
    cute::tma_store_fence();
    __syncwarp();
    if (lane == 0) {
      Tensor mO = p.tma_o.get_tma_tensor(make_shape(p.rows, _128{}, p.HV, p.batches));
      Tensor gO = local_tile(domain_offset(make_coord(static_cast<int>(row0) + 16 * warp, v0), mO(_, _, hv, batch)),
                             Shape<_16, NC>{}, make_coord(_0{}, _0{}));
      Tensor sO = make_tensor(make_smem_ptr(tile + 16 * kCols * warp), typename Cfg::LayO16{});
      auto cta = p.tma_o.get_slice(0);
      copy(p.tma_o, cta.partition_S(sO), cta.partition_D(gO));
      cute::tma_store_arrive();
      if constexpr (!kOwn) cute::tma_store_wait<0>();
    }
    if constexpr (!kOwn) release(s);
    return;
  }
  uint32_t packed[kCols / 4];
  CUTE_UNROLL
  for (int q = 0; q < kCols / 4; ++q) packed[q] = pack2f<E>(value(2 * q), value(2 * q + 1));
  if constexpr (!kOwn) release(s);
  // Pair q of the thread: row row_a or row_b (q odd), columns 8 (q / 2) + 2 (tidx % 4) + {0, 1}.
  const int col0 = 2 * (tidx % 4);
  E* const obase = p.o + int64_t{batch} * p.o_sb + int64_t{hv} * p.o_sh + v0;
  E* const dst_a = obase + (row0 + row_a) * p.o_st;
  E* const dst_b = obase + (row0 + row_b) * p.o_st;
  CUTE_UNROLL
  for (int q = 0; q < kCols / 4; ++q) {
    if (((q & 1) ? row_b : row_a) >= len) continue;
    E* dst = ((q & 1) ? dst_b : dst_a) + 8 * (q >> 1) + col0;
    if (p.o_pair) {
      *reinterpret_cast<uint32_t*>(dst) = packed[q];
    } else {
      const uint32_t v = packed[q];
      reinterpret_cast<uint16_t*>(dst)[0] = static_cast<uint16_t>(v & 0xffffu);
      reinterpret_cast<uint16_t*>(dst)[1] = static_cast<uint16_t>(v >> 16);
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    state_output_sm90_kernel(const __grid_constant__ SoParams<Cfg> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using E = typename Cfg::Element;
  constexpr int kStages = Cfg::kStages;
  constexpr int kCols = Cfg::kCols;
  using NC = typename Cfg::NC;
  using FullBar = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBar = cutlass::arch::ClusterBarrier;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<SoSmem<Cfg>*>(smem_raw);

  const int vb = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
  const int v0 = kCols * vb;
  const int hq = hv / p.group;
  const int wg = threadIdx.x / 128, tidx = threadIdx.x % 128, lane = threadIdx.x % 32;
  int64_t s0, s1;
  seq_rows(p.L, n, &s0, &s1);
  const int nchunks = static_cast<int>((s1 - s0 + kChunk - 1) / kChunk);
  const int batch = p.L.varlen ? 0 : n;
  auto chunk_len = [&](int ci) {
    const int64_t left = s1 - (s0 + int64_t{ci} * kChunk);
    return static_cast<int>(left < kChunk ? left : kChunk);
  };
  const int g_col = hv & 3;

  constexpr int kCluster = Cfg::kCluster;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      FullBar::init(&ss.full[s], 1);
      // Every consumer warp of every CTA in the cluster frees a stage: the producers write into
      // all of their smem.
      EmptyBar::init(&ss.empty[s], kCluster * kConsumerWarps);
    }
    cutlass::arch::fence_barrier_init();
  }
  if constexpr (kCluster > 1) {
    cute::cluster_arrive_relaxed();  // barriers initialised in every CTA before any multicast
    cute::cluster_wait();
  } else {
    __syncthreads();
  }
  // A consumer warp's release of stage s (lane 0 arrives on every CTA's empty barrier).
  auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) {
      if constexpr (kCluster == 1) {
        EmptyBar::arrive(&ss.empty[s]);
      } else {
        CUTE_UNROLL
        for (int c = 0; c < kCluster; ++c) EmptyBar::arrive(&ss.empty[s], c, 1);
      }
    }
  };

  if (wg == 2) {
    // ---------------- producer
    cutlass::arch::warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (tidx == 0) {
      const int rank = kCluster == 1 ? 0 : static_cast<int>(cute::block_rank_in_cluster());
      const uint16_t mask = static_cast<uint16_t>((1u << kCluster) - 1);
      Tensor mT = p.tma_t.get_tma_tensor(make_shape(p.rows, _64{}, p.HV, p.batches));
      Tensor mQ = p.tma_q.get_tma_tensor(make_shape(p.rows, _128{}, p.H, p.batches));
      Tensor mV = p.tma_v.get_tma_tensor(make_shape(p.rows, _128{}, p.HV, p.batches));
      Tensor mP = p.tma_p.get_tma_tensor(make_shape(p.rows, _64{}, p.HV, p.batches));
      Tensor mKt = p.tma_kt.get_tma_tensor(make_shape(_128{}, p.rows, p.H, p.batches));
      Tensor mG = p.tma_g.get_tma_tensor(make_shape(p.heads_g, p.rows, p.batches));
      auto tt = p.tma_t.get_slice(rank);
      auto tq = p.tma_q.get_slice(rank);
      auto tv = p.tma_v.get_slice(0);
      auto tp = p.tma_p.get_slice(rank);
      auto tk = p.tma_kt.get_slice(rank);
      auto tg = p.tma_g.get_slice(0);
      // This CTA's part of a shared tile, to every CTA of the cluster.
      auto shared_copy = [&](const auto& tma, uint64_t& bar, const auto& src, auto&& dst) {
        if constexpr (kCluster == 1) copy(tma.with(bar), src, dst);
        else copy(tma.with(bar, mask), src, dst);
      };
      for (int ci = 0; ci < nchunks; ++ci) {
        const int s = ci % kStages, use = ci / kStages;
        if (use > 0) EmptyBar::wait(&ss.empty[s], (use - 1) & 1);
        const int row0 = static_cast<int>(s0 + int64_t{ci} * kChunk);
        uint64_t& bar = ss.full[s];
        FullBar::arrive_and_expect_tx(&bar, Cfg::kStageBytes);
        Tensor sT = make_tensor(make_smem_ptr(ss.t[s].data()), typename Cfg::LayP{});
        Tensor sQ = make_tensor(make_smem_ptr(ss.q[s].data()), typename Cfg::LayRowsD{});
        Tensor sV = make_tensor(make_smem_ptr(ss.v[s].data()), typename Cfg::LayU{});
        Tensor sP = make_tensor(make_smem_ptr(ss.p[s].data()), typename Cfg::LayP{});
        Tensor sKt = make_tensor(make_smem_ptr(ss.kt[s].data()), typename Cfg::LayKt{});
        Tensor sG = make_tensor(make_smem_ptr(ss.g[s].data()), typename Cfg::LayG{});
        Tensor gT = local_tile(domain_offset(make_coord(row0, _0{}), mT(_, _, hv, batch)), Shape<_64, _64>{},
                               make_coord(_0{}, _0{}));
        Tensor gQ = local_tile(domain_offset(make_coord(row0, _0{}), mQ(_, _, hq, batch)), Shape<_64, _128>{},
                               make_coord(_0{}, _0{}));
        Tensor gV = local_tile(domain_offset(make_coord(row0, v0), mV(_, _, hv, batch)), Shape<_64, NC>{},
                               make_coord(_0{}, _0{}));
        Tensor gP = local_tile(domain_offset(make_coord(row0, _0{}), mP(_, _, hv, batch)), Shape<_64, _64>{},
                               make_coord(_0{}, _0{}));
        Tensor gKt = local_tile(domain_offset(make_coord(_0{}, row0), mKt(_, _, hq, batch)), Shape<_128, _64>{},
                                make_coord(_0{}, _0{}));
        Tensor gG = local_tile(domain_offset(make_coord(hv & ~3, row0), mG(_, _, batch)), Shape<_4, _64>{},
                               make_coord(_0{}, _0{}));
        // The tiles the state warpgroup reads first.
        shared_copy(p.tma_t, bar, tt.partition_S(gT), tt.partition_D(sT));
        shared_copy(p.tma_kt, bar, tk.partition_S(gKt), tk.partition_D(sKt));
        copy(p.tma_v.with(bar), tv.partition_S(gV), tv.partition_D(sV));
        copy(p.tma_g.with(bar), tg.partition_S(gG), tg.partition_D(sG));
        shared_copy(p.tma_q, bar, tq.partition_S(gQ), tq.partition_D(sQ));
        shared_copy(p.tma_p, bar, tp.partition_S(gP), tp.partition_D(sP));
      }
    }
    __syncwarp();
  } else {
    Tensor sShi = make_tensor(make_smem_ptr(ss.s_hi.data()), typename Cfg::LayS{});
    Tensor sVt = make_tensor(make_smem_ptr(ss.vt.data()), typename Cfg::LayVt{});

    if (wg == 0) {
      // ---------------- state
      cutlass::arch::warpgroup_reg_alloc<Cfg::kStateRegs>();
      typename Cfg::MmaRowsS mma_x;
      typename Cfg::MmaRowsC mma_vn;
      typename Cfg::MmaKeys mma_up;
      auto thr_x = mma_x.get_thread_slice(tidx);
      auto thr_vn = mma_vn.get_thread_slice(tidx);
      auto thr_up = mma_up.get_thread_slice(tidx);
      Tensor tXrB = thr_x.partition_fragment_B(sShi);   // (MMA, 1, 8)
      Tensor tVNrB = thr_vn.partition_fragment_B(sVt);  // R (in ṽ's buffer), (MMA, 1, 4)
      Tensor tUPrB = thr_up.partition_fragment_B(sVt);  // (MMA, 1, 4)
      Tensor accX = partition_fragment_C(mma_x, Shape<_64, NC>{});
      Tensor accVN = partition_fragment_C(mma_vn, Shape<_64, NC>{});
      Tensor accS = partition_fragment_C(mma_up, Shape<_128, NC>{});
      Tensor cVN = thr_vn.partition_C(make_identity_tensor(Shape<_64, NC>{}));
      Tensor cS = thr_up.partition_C(make_identity_tensor(Shape<_128, NC>{}));
      check_acc_layout(accX);
      check_acc_layout(accVN);
      check_acc_layout(accS);
      static_assert(decltype(size(accVN))::value == kCols / 2 && decltype(size(accS))::value == kCols);
      static_assert(decltype(stride<1>(accS.layout()))::value == kCols / 2);
      static_assert(std::is_same_v<decltype(accX.layout()), decltype(accVN.layout())>,
                    "X's accumulator must be laid out as VN's");

      const int64_t init_row = p.init.row(n);  // -1: no state
      CUTE_UNROLL
      for (int i = 0; i < size(accS); ++i) {
        const int key = get<0>(cS(i)), c = get<1>(cS(i));
        accS(i) = init_row >= 0
                      ? static_cast<const float*>(p.init.p)[p.init.at(init_row, hv, key, v0 + c)]
                      : 0.f;
      }
      // Shared-window addresses for the 4-byte pair stores (Cfg::kStsm false), once: the S pair
      // (c, key) for the kCols / 2 state pairs, and for the kCols / 4 VN pairs ṽ (c, row) and v_new
      // (c, row), as bases plus immediates. Kept as 16 S offsets, they were recomputed from the
      // swizzle every chunk (~60 instructions between the update and kBarS); kept as 16 ṽ / v_new
      // offsets, ~80 instructions among the VN WGMMAs.
      // S pair q at so_base(s_pair0, so_s_hi_base(q)) + so_s_hi_imm(q); ṽ pair q at
      // so_base(vt_pair0, q >> 1) + so_vt_imm(q), its v_new (and V's pair) at the same offset in the
      // stage's V tile.
      const uint32_t s_hi_base = cute::cast_smem_ptr_to_uint(ss.s_hi.data());
      const uint32_t vt_base = cute::cast_smem_ptr_to_uint(ss.vt.data());
      static_assert(std::is_same_v<typename Cfg::LayVt, typename Cfg::LayVn>);
      const uint32_t s_pair0 = s_hi_base + smem_off(&sShi(get<1>(cS(0)), get<0>(cS(0))), ss.s_hi.data());
      const uint32_t vt_pair0 = vt_base + smem_off(&sVt(get<1>(cVN(0)), get<0>(cVN(0))), ss.vt.data());
      // Where VN pair q goes in ṽ's buffer; + (tile - vt_base), in a stage's V tile.
      auto vt_pair_addr = [&](int q) { return so_base(vt_pair0, q >> 1) + so_vt_imm<kCols>(q); };
      // The thread's two accumulator rows (pairs q with q & 1 == 0 and == 1).
      const int row_a = get<0>(cVN(0)), row_b = get<0>(cVN(2));
      auto publish = [&]() {
        if constexpr (Cfg::kStsm) {
          // S as (key, value): values contiguous in each key's row of LayS.
          Tensor sShiKV = make_tensor(make_smem_ptr(ss.s_hi.data()),
                                      composition(typename Cfg::LayS{}, Layout<Shape<_128, NC>, Stride<NC, _1>>{}));
          Tensor rS = make_tensor_like<E>(accS);
          CUTE_UNROLL
          for (int i = 0; i < size(accS); ++i) rS(i) = static_cast<E>(accS(i));
          stsm_store(mma_up, tidx, rS, sShiKV);
        } else {
          CUTE_UNROLL
          for (int q = 0; q < kCols / 2; ++q) {
            const int i = so_pair_elem<kCols>(q);
            const uint32_t addr = so_base(s_pair0, so_s_hi_base<kCols>(q)) + so_s_hi_imm<kCols>(q);
            sts32(addr, pack2f<E>(accS(i), accS(i + 1)));
          }
        }
        cutlass::arch::fence_view_async_shared();
      };
      // A (row, value) view of ṽ's buffer or of a stage's V tile (LayVt: values contiguous in a row).
      using RowsOfVals = Layout<Shape<_64, NC>, Stride<NC, _1>>;
      // The thread's 16-bit accumulator-shaped tile r to ṽ's buffer or a stage's V tile (LayVt
      // both): stmatrix, or 4-byte pair stores.
      auto store_vals = [&](const auto& r, E* tile) {
        if constexpr (Cfg::kStsm) {
          Tensor dst = make_tensor(make_smem_ptr(tile), composition(typename Cfg::LayVt{}, RowsOfVals{}));
          stsm_store(mma_vn, tidx, r, dst);
        } else {
          const uint32_t to_v = cute::cast_smem_ptr_to_uint(tile) - vt_base;
          CUTE_UNROLL
          for (int q = 0; q < kCols / 4; ++q) sts32(vt_pair_addr(q) + to_v, pack2<E>(r(2 * q), r(2 * q + 1)));
        }
      };
      // Chunk ci's stage loaded, with K and V rows past len zeroed (they meet zero coefficients
      // and ṽ rows that are 0, and 0 x NaN need not be 0).
      auto stage_ready = [&](int ci) {
        if (ci >= nchunks) return;
        const int s = ci % kStages, len = chunk_len(ci);
        FullBar::wait(&ss.full[s], (ci / kStages) & 1);
        if (len < kChunk) {
          Tensor sKt = make_tensor(make_smem_ptr(ss.kt[s].data()), typename Cfg::LayKt{});
          Tensor sV = make_tensor(make_smem_ptr(ss.v[s].data()), typename Cfg::LayU{});
          for (int x = tidx; x < (kChunk - len) * 128; x += 128) sKt(x % 128, len + x / 128) = E(0.f);
          for (int x = tidx; x < (kChunk - len) * kCols; x += 128) sV(len + x / kCols, x % kCols) = E(0.f);
          cutlass::arch::fence_view_async_shared();
          gpu::named_barrier_sync(kBarStateWg, 128);
        }
      };

      stage_ready(0);
      publish();
      for (int ci = 0; ci < nchunks; ++ci) {
        const int s = ci % kStages;
        const int len = chunk_len(ci);
        const uint32_t v_from_vt = cute::cast_smem_ptr_to_uint(ss.v[s].data()) - vt_base;
        gpu::named_barrier_sync(kBarS, kConsumerThreads);

        // X = K S_hi over the 128 keys (the Kᵀ tile read as K's (row, key) K-major tile: the same
        // bytes).
        Tensor tXrA = thr_x.partition_fragment_A(make_tensor(make_smem_ptr(ss.kt[s].data()), typename Cfg::LayRowsD{}));
        wg_issue(mma_x, accX, tXrA, tXrB);
        // While the tensor cores work: the gates of this thread's rows and its pairs of V.
        const float* gs = ss.g[s].data();
        const float glast = gs[4 * (len - 1) + g_col];
        const float g_a = gs[4 * row_a + g_col], g_b = gs[4 * row_b + g_col];
        const bool ok_a = row_a < len, ok_b = row_b < len;
        const float eg_a = __expf(g_a), eg_b = __expf(g_b);
        const float ex_a = ok_a ? __expf(glast - g_a) : 0.f;
        const float ex_b = ok_b ? __expf(glast - g_b) : 0.f;
        uint32_t vpair[kCols / 4];
        CUTE_UNROLL
        for (int q = 0; q < kCols / 4; ++q) vpair[q] = lds32(vt_pair_addr(q) + v_from_vt);
        // S's decay: S is no operand of X (its 16-bit copy is), so the multiplies run under X's
        // latency.
        const float decay = __expf(glast);
        CUTE_UNROLL
        for (int i = 0; i < size(accS); ++i) accS(i) *= decay;
        warpgroup_fence_operand(accS);
        warpgroup_wait<0>();
        warpgroup_fence_operand(accX);
        gpu::named_barrier_arrive(kBarX, kConsumerThreads);  // the output warpgroup's Q S may start

        // R = V - diag(exp(g)) X in 16 bits, into ṽ's buffer (ṽ's last reader, the update, has
        // completed), then v_new = C R.
        {
          Tensor rR = make_tensor_like<E>(accX);
          CUTE_UNROLL
          for (int q = 0; q < kCols / 4; ++q) {
            const float eg = (q & 1) ? eg_b : eg_a;
            float v0, v1;
            unpack2f<E>(vpair[q], &v0, &v1);
            rR(2 * q) = static_cast<E>(v0 - eg * accX(2 * q));
            rR(2 * q + 1) = static_cast<E>(v1 - eg * accX(2 * q + 1));
          }
          store_vals(rR, ss.vt.data());
        }
        cutlass::arch::fence_view_async_shared();
        gpu::named_barrier_sync(kBarStateWg, 128);
        Tensor tVNrA = thr_vn.partition_fragment_A(make_tensor(make_smem_ptr(ss.t[s].data()), typename Cfg::LayP{}));
        wg_issue(mma_vn, accVN, tVNrA, tVNrB);
        warpgroup_wait<0>();
        warpgroup_fence_operand(accVN);

        // v_new (0 past len) and ṽ = diag(exp(g_last - g)) v_new, in 16 bits; v_new over the
        // stage's V tile (V's reads are behind the barrier above).
        {
          Tensor rVt = make_tensor_like<E>(accVN);
          Tensor rVn = make_tensor_like<E>(accVN);
          CUTE_UNROLL
          for (int i = 0; i < size(accVN); ++i) {
            const bool second = (i & 2) != 0;  // the thread's second row
            const float vn = (second ? ok_b : ok_a) ? accVN(i) : 0.f;
            rVt(i) = static_cast<E>(vn * (second ? ex_b : ex_a));
            rVn(i) = static_cast<E>(vn);
          }
          store_vals(rVt, ss.vt.data());
          store_vals(rVn, ss.v[s].data());
        }
        cutlass::arch::fence_view_async_shared();
        gpu::named_barrier_sync(kBarV, kConsumerThreads);

        // S = exp(g_last) S + Kᵀ ṽ (S decayed above; Kᵀ's columns past len zeroed).
        Tensor tAk = thr_up.partition_fragment_A(make_tensor(make_smem_ptr(ss.kt[s].data()), typename Cfg::LayKt{}));
        warpgroup_fence_operand(accS);
        warpgroup_arrive();
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tAk); ++kb) gemm(mma_up, tAk(_, _, kb), tUPrB(_, _, kb), accS);
        warpgroup_commit_batch();
        stage_ready(ci + 1);
        warpgroup_wait<0>();  // the update
        warpgroup_fence_operand(accS);
        publish();  // after the last chunk too: harmless
        release(s);
      }
      const int64_t fin_row = p.fin.row(n);  // -1: no state
      if (fin_row >= 0) {
        CUTE_UNROLL
        for (int q = 0; q < kCols / 2; ++q) {
          CUTE_UNROLL
          for (int e = 0; e < 2; ++e) {
            const int i = so_pair_elem<kCols>(q) + e;
            const int key = get<0>(cS(i)), c = get<1>(cS(i));
            static_cast<float*>(p.fin.p)[p.fin.at(fin_row, hv, key, v0 + c)] = accS(i);
          }
        }
      }
    } else {
      // ---------------- output
      cutlass::arch::warpgroup_reg_dealloc<Cfg::kOutputRegs>();
      typename Cfg::MmaRowsS mma_o;
      typename Cfg::MmaRowsC mma_pv;
      auto thr_o = mma_o.get_thread_slice(tidx);
      auto thr_pv = mma_pv.get_thread_slice(tidx);
      Tensor tOrBhi = thr_o.partition_fragment_B(sShi);  // (MMA, 1, 8)
      Tensor accO = partition_fragment_C(mma_o, Shape<_64, NC>{});
      Tensor accPV = partition_fragment_C(mma_pv, Shape<_64, NC>{});
      Tensor cPV = thr_pv.partition_C(make_identity_tensor(Shape<_64, NC>{}));
      check_acc_layout(accO);
      check_acc_layout(accPV);
      static_assert(decltype(size(accO))::value == kCols / 2 && decltype(size(accPV))::value == kCols / 2);
      // The thread's two rows of the 64 x kCols output (as in accPV).
      const int row_a = get<0>(cPV(0)), row_b = get<0>(cPV(2));

      for (int ci = 0; ci < nchunks; ++ci) {
        const int s = ci % kStages;
        const int len = chunk_len(ci);
        gpu::named_barrier_sync(kBarS, kConsumerThreads);
        FullBar::wait(&ss.full[s], (ci / kStages) & 1);
        // Q S once the state warpgroup's X has completed, so that the two do not share the tensor
        // cores on the chain: Q S runs while R is formed.
        gpu::named_barrier_sync(kBarX, kConsumerThreads);
        Tensor tA = thr_o.partition_fragment_A(make_tensor(make_smem_ptr(ss.q[s].data()), typename Cfg::LayRowsD{}));
        wg_issue(mma_o, accO, tA, tOrBhi);
        // The row scales while Q S runs (read after P v_new, their loads' latency was ~5% of this
        // warpgroup's stall samples).
        const float* gs = ss.g[s].data();
        const float ex_a = p.scale * __expf(gs[4 * row_a + g_col]);
        const float ex_b = p.scale * __expf(gs[4 * row_b + g_col]);
        warpgroup_wait<0>();
        warpgroup_fence_operand(accO);
        gpu::named_barrier_sync(kBarV, kConsumerThreads);

        Tensor tAp = thr_pv.partition_fragment_A(make_tensor(make_smem_ptr(ss.p[s].data()), typename Cfg::LayP{}));
        Tensor tPVrB = thr_pv.partition_fragment_B(make_tensor(make_smem_ptr(ss.v[s].data()), typename Cfg::LayVn{}));
        wg_issue(mma_pv, accPV, tAp, tPVrB);
        warpgroup_wait<0>();
        warpgroup_fence_operand(accPV);

        so_store_output<Cfg>(p, ss, ci, s, mma_pv, accO, accPV, tidx, row_a, row_b, ex_a, ex_b,
                             s0 + int64_t{ci} * kChunk, len, hv, batch, v0, release);
      }
      // The CTA's shared memory outlives the last TMA store's reads of it.
      if (lane == 0) cute::tma_store_wait<0>();
    }
  }
  // No CTA leaves while others may still write into its shared memory or arrive on its barriers.
  if constexpr (kCluster > 1) cute::cluster_sync();
#endif
}

}  // namespace attnkit::gdn_cuda::sm90
