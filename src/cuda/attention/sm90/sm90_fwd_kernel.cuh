// Hopper (sm_90a) attention prefill: warp-specialized, TMA + WGMMA.
//
// A work tile is 64·C query rows of one (batch, head), C = 2 consumer warpgroups (3 at D=64, see
// FwdConfig). Warpgroups:
//   WG0 (producer): gives registers away; one thread issues the TMA loads of each tile's Q and of
//                   its K and V tiles into an N-stage shared-memory pipeline, last KV tile first.
//   WG1..WGC (consumers): each owns 64 of the tile's query rows. Per KV tile: S = Q·Kᵀ (WGMMA,
//                   both operands in shared memory), masking only on tiles that need it, online
//                   softmax in registers (exp2 with scale·log2e folded in), P converted to 16-bit
//                   in registers and used as the A operand of O += P·V (WGMMA, A from registers),
//                   O kept in fp32 registers. O is rescaled only when a row's running max grew.
//                   (Keeping the old max while it grows by up to 2^8, as Blackwell kernels do,
//                   is faster but rounds a peaked row's top P, no longer exactly 1, to 16 bits:
//                   one bf16 ulp of error at |O| ~ 4 in the softcap test. Summing the rounded P
//                   instead broke the LSE bound. So the max is exact.)
// Overlap: inside a consumer warpgroup, S(n) = Q·K(n)ᵀ and O += P(n+1)·V(n+1) are issued together
// and the softmax of S(n) runs while the P·V GEMM still works; between the consumer warpgroups,
// named barriers make them take turns issuing GEMMs (ping-pong), so one's softmax overlaps the
// others' GEMMs. (ptxas places the wait for the in-flight P·V above most of the softmax's exp2,
// so most of that overlap comes from the ping-pong. Pinning every exp2 ahead of the wait, with a
// shared store of the row sums, measured slower on the FA3 shapes, so the compiler's placement
// stays.)
// K and V each flow through a PipelineTmaAsync (full barriers carry the TMA
// transaction bytes, empty barriers the consumers' releases); at D=256 the producer issues K one
// tile ahead of V (FwdConfig::kKvLookahead).
// The epilogue normalises O, writes it with direct 16-byte stores after a transpose inside each
// quad of lanes (rows < Sq only: a TMA store would clip only at the end of the whole, possibly
// ragged, tensor; and no shared memory is free then) and writes the LSE. (Measured faster than
// 4-byte stores.)
// Grid: from the scheduler (sm90_tile_scheduler.h): persistent, at most one CTA per SM looping over
// work tiles (no mask; causal up to 8192 query rows, in pairs of a long and a short query tile;
// causal at d64 from 1k up), or one CTA per tile, longest first (causal at d128 / d256 beyond).
// The K/V pipelines run on across tiles. Q has two buffers in the d64 causal variant
// (FwdConfig::kQStages), so the next tile's Q loads while the current tile runs; otherwise one,
// refilled for the next tile as soon as every consumer warp has finished its last Q·Kᵀ of the
// current one (q_empty), so the next tile's loads overlap the current tile's last P·V and epilogue.
// (No cluster multicast of K / V tiles, which FA3 uses at head dims >= 128 without a mask: L2
// does not limit d128, and with two stages at d256 the coupling of both CTAs' releases costs more
// than it saves.)
//
// The KV loop runs from the last visible KV tile down to the first: the mask policy (sm90_mask.h)
// says which tiles a query tile sees and which of them need the mask; those near the diagonal come
// first, then the fully visible ones without mask code, then (windows, chunks) those at the left
// edge. Score modifiers and sinks are policies too (sm90_score_mod.h).
// Split-KV: a work tile is then (query tile, split); the split runs an even share of the query
// tile's KV tiles (split_kv_range) and writes fp32 partials for the combine kernel instead of O.
// Per-sequence lengths (ragged Q / K, seqused_k) are read per tile (sm90_seqlen.h). The last KV
// tile of a sequence is loaded so that it ends at the sequence's last key (rows from sk - N, the
// overlap with the tile before it masked): a V row past the sequence end is never read, since
// 0 x NaN would poison P·V where such a row is an unfilled cache slot.
// Where a K / V tile is read from (contiguous or ragged rows, or a page of a paged cache) is the KV
// policy's (sm90_kv.h), which the producer alone asks.
#pragma once

#include <cuda_runtime.h>

// The WGMMA shapes whose N is not a power-of-two multiple of 8 (m64n80, m64n176, ...) are behind
// this switch; without them CuTe's op selector silently splits such a KV tile into m64n16 pieces.
// It must come before the first CuTe include of the translation unit (this header is it).
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_conversion.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/attention/sm90/sm90_fwd_params.h"
#include "cuda/attention/sm90/sm90_kv.h"
#include "cuda/attention/sm90/sm90_mask.h"
#include "cuda/attention/sm90/sm90_score_mod.h"
#include "cuda/attention/sm90/sm90_seqlen.h"
#include "cuda/attention/sm90/sm90_tile_scheduler.h"

namespace attnkit::gpu::sm90 {

using namespace cute;

// Compile-time shape of one variant: tile sizes, shared-memory layouts, MMAs, TMA types.
// kConsumerWGs consumer warpgroups each own 64 query rows of the CTA's tile. At D=64 the GEMMs
// are short next to the softmax (one exp2 per score whatever D), so three warpgroups take turns:
// each one's softmax then has two other warpgroups' GEMMs to hide behind.
// Three measured faster than two at D=64 on the FA3 shapes, causal or not.
// kHeadDim is Q's and K's head dim, kHeadDimV V's and O's (192 / 128: DeepSeek-style heads).
constexpr int sm90_consumer_wgs(int d) { return d == 64 ? 3 : 2; }
constexpr int sm90_kv_stages(int d) { return d <= 128 ? 3 : 2; }

template <class Element_, int kHeadDim_, bool kCausal_, int kConsumerWGs_ = sm90_consumer_wgs(kHeadDim_),
          int kBlockN_ = sm90_kv_block(kHeadDim_), int kStages_ = sm90_kv_stages(kHeadDim_),
          int kHeadDimV_ = kHeadDim_, int kQStages_ = 1>
struct FwdConfig {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr bool kCausal = kCausal_;
  static constexpr int kConsumerWGs = kConsumerWGs_;
  static_assert(kConsumerWGs == 2 || kConsumerWGs == 3);
  static constexpr int kBlockM = 64 * kConsumerWGs;
  // KV tile and pipeline depth. Per consumer thread O takes D/2 registers, S N/2 and P N/4.
  // At D=128, N=128 with 3 stages measured fastest on the FA3 shapes (against N=176 with 2
  // stages, N=128 with 2, and three warpgroups with N=64 and 4 stages). At D=256 (Q + 2 stages of
  // N=64 fill shared memory) N=80 with K ahead of V is faster for long keys only, so the plan
  // picks that variant there (sm90_dispatch.cu); without K ahead of V, N=80 lost everywhere.
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  // Where O's rescale runs: inside the ping-pong turn, between issuing Q·Kᵀ and P·V, so its
  // FMULs run in the shadow of Q·Kᵀ; or (D=128) right after P is converted, outside the turn, so
  // the other warpgroup's turn comes sooner. Each placement measured faster at its head dim.
  // D=64 (three warpgroups) was not measured the other way.
  static constexpr bool kRescaleInTurn = kHeadDim != 128;
  // The producer issues K one KV tile ahead of V, the order the consumers use them in (S(n) with
  // P(n+1)·V(n+1)), so a K load never waits for a V stage to free up. With two stages (D=256)
  // that wait left the next K late, most at short lengths; with three (D=64, D=128) the lookahead
  // measured no faster.
  static constexpr bool kKvLookahead = kHeadDim > 128;
  // Q buffers: with two, the producer loads the next work tile's Q as soon as that tile's first K
  // is issued, instead of after every consumer warp's last Q·Kᵀ of the current tile, so Q's load
  // latency leaves the path between tiles. Which variants take two: run_fwd (sm90_fwd_launch.cuh);
  // at d128 / d256 the K / V stages leave no shared memory for a second Q.
  static constexpr int kQStages = kQStages_;
  static_assert(kQStages == 1 || kQStages == 2);
  static constexpr int kConsumerThreads = 128 * kConsumerWGs;
  static constexpr int kThreads = 128 + kConsumerThreads;

  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileK = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using TileVt = Shape<Int<kHeadDimV>, Int<kBlockN>>;
  using TileS = Shape<Int<kBlockM>, Int<kBlockN>>;
  using TileO = Shape<Int<kBlockM>, Int<kHeadDimV>>;

  // Q and K: rows of D contiguous (K-major for S = Q·Kᵀ). V is viewed transposed, (D, keys) with D
  // contiguous, which is the MN-major B operand of O = P·V; TMA writes it in that layout directly.
  // The widest swizzle whose atom (64 16-bit elements for 128 bytes, 32 for 64) divides the head
  // dim: 128-byte at 64 / 128 / 192 / 256, 64-byte at 96.
  using AtomK = std::conditional_t<kHeadDim % 64 == 0, GMMA::Layout_K_SW128_Atom<Element>,
                                   GMMA::Layout_K_SW64_Atom<Element>>;
  using AtomVt = std::conditional_t<kHeadDimV % 64 == 0, GMMA::Layout_MN_SW128_Atom<Element>,
                                    GMMA::Layout_MN_SW64_Atom<Element>>;
  static_assert(kHeadDim % 32 == 0 && kHeadDimV % 32 == 0, "head dims are multiples of 32");
  using SmemLayoutQ = decltype(tile_to_shape(
      AtomK{}, make_shape(Int<kBlockM>{}, Int<kHeadDim>{}, Int<kQStages>{})));
  using SmemLayoutK = decltype(tile_to_shape(
      AtomK{}, make_shape(Int<kBlockN>{}, Int<kHeadDim>{}, Int<kStages>{})));
  // Vᵀ's atoms (64 head-dim columns x 8 keys) are stacked along the keys first, so that each
  // 64-column slab of a stage is one TMA box (64 x BlockN): stacked along the head dim first, a box
  // could span only one atom's 8 keys, and the producer issued 32 TMA loads per V tile at d128,
  // against 2 for K. WGMMA reads either order (the slab stride is the descriptor's leading byte
  // offset).
  using SmemLayoutVt = decltype(tile_to_shape(
      AtomVt{}, make_shape(Int<kHeadDimV>{}, Int<kBlockN>{}, Int<kStages>{}), Step<_2, _1, _3>{}));

  // Warpgroups stacked along M: thread t of the consumers works on rows 64*(t/128)..+63.
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBlockN>, Int<kHeadDim>>>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));
  using TiledMmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kHeadDimV>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumerWGs>, _1, _1>>{}));

  // Global tensors as TMA sees them: (rows, D, heads, batch) for Q and K, (D, rows, heads, batch)
  // for V. Strides in elements; the head dim is contiguous.
  using ShapeRows = Shape<int32_t, Int<kHeadDim>, int32_t, int32_t>;
  using StrideRows = Stride<int64_t, _1, int64_t, int64_t>;
  using ShapeVt = Shape<Int<kHeadDimV>, int32_t, int32_t, int32_t>;
  using StrideVt = Stride<_1, int64_t, int64_t, int64_t>;

  using TmaQ = decltype(make_tma_copy(
      SM90_TMA_LOAD{},
      make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeRows{}, StrideRows{}),
      take<0, 2>(SmemLayoutQ{})));
  using TmaK = decltype(make_tma_copy(
      SM90_TMA_LOAD{},
      make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeRows{}, StrideRows{}),
      take<0, 2>(SmemLayoutK{})));
  using TmaV = decltype(make_tma_copy(
      SM90_TMA_LOAD{},
      make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeVt{}, StrideVt{}),
      take<0, 2>(SmemLayoutVt{})));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesK = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesV = kBlockN * kHeadDimV * sizeof(Element);

  // setmaxnreg budgets. The CTA keeps the registers it was launched with (65536 / kThreads per
  // thread, rounded down to 8: 168 or 128); what the producer gives back must cover what the
  // consumers take, or their setmaxnreg.inc would wait forever:
  //   2 consumers: (168 - 24) x 128 = (240 - 168) x 256;  3 consumers: (128 - 32) x 128 = (160 - 128) x 384.
  // (With 24 the three-consumer producer spilled its persistent-loop state; 32 does not.)
  static constexpr int kProducerRegs = kConsumerWGs == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumerWGs == 2 ? 240 : 160;
  static_assert((65536 / kThreads / 8 * 8 - kProducerRegs) * 128 >=
                    (kConsumerRegs - 65536 / kThreads / 8 * 8) * kConsumerThreads,
                "the producer must give back at least what the consumers take");
};

// Every shared-memory object of the kernel, each at a compile-time offset. The 128-byte swizzle
// needs 1024-byte aligned tiles.
template <class Cfg>
struct SharedStorage {
  using Element = typename Cfg::Element;
  alignas(1024) cute::array_aligned<Element, cosize_v<typename Cfg::SmemLayoutQ>, 1024> q;
  alignas(1024) cute::array_aligned<Element, cosize_v<typename Cfg::SmemLayoutK>, 1024> k;
  alignas(1024) cute::array_aligned<Element, cosize_v<typename Cfg::SmemLayoutVt>, 1024> v;
  typename Cfg::Pipeline::SharedStorage pipe_k;
  typename Cfg::Pipeline::SharedStorage pipe_v;
  // Per Q buffer: its tile landed (transaction barrier, one phase per tile loaded into it); every
  // consumer warp is done reading it (one phase per tile).
  alignas(8) uint64_t q_full[Cfg::kQStages];
  alignas(8) uint64_t q_empty[Cfg::kQStages];

  CUTE_DEVICE auto tensor_q() { return make_tensor(make_smem_ptr(q.data()), typename Cfg::SmemLayoutQ{}); }
  CUTE_DEVICE auto tensor_k() { return make_tensor(make_smem_ptr(k.data()), typename Cfg::SmemLayoutK{}); }
  CUTE_DEVICE auto tensor_vt() { return make_tensor(make_smem_ptr(v.data()), typename Cfg::SmemLayoutVt{}); }
};

template <class Cfg, class Sched, class Kv>
struct FwdKernelParams {
  typename Cfg::TmaQ tma_q;
  typename Cfg::TmaK tma_k;
  typename Cfg::TmaV tma_v;
  typename Cfg::Element* o;
  int64_t o_batch, o_row, o_head;
  float* lse;
  int64_t lse_batch, lse_row, lse_head;
  int q_batches, k_batches;  // TMA batch extents (1 for ragged tensors; paged K/V: the pages)
  int hq, hkv, group;
  WithVarlen<Sched> sched;
  int pingpong;  // 1: the consumer warpgroups take turns issuing GEMMs
  SeqLens seqs;
  MaskLocal mask;  // run-time window / chunk sizes (read by MaskLocal only)
  float scale;
  float softcap;
  const float* sinks;  // SinkLearned only
  int64_t sinks_stride;
  Kv kv;  // KV operand policy (sm90_kv.h): contiguous or paged
  // Split-KV (sched.num_splits > 1): each split writes its normalised fp32 O and natural-log LSE
  // (sinks left out: the combine adds them) to part_o [split][flat_row][hq][dv] and part_lse
  // [split][flat_row][hq], flat_row = q_batch * seqs.q_rows + q_offset + row, the layout the
  // split-KV combine (portable/combine_kernel.cuh) reads; O and LSE are then not written here.
  float* part_o;
  float* part_lse;
  int64_t part_rows;
};

// Named barriers (user ids, CUTLASS adds its reserved count) for the consumers' ping-pong.
constexpr int kTurnBarrier = 0;

// Accumulator fragment of a 64xN warpgroup MMA, ((2,2,N/8),1,1), viewed as (rows, cols):
// rows (the +8 row half), cols (adjacent pair, n8 block).
template <class Layout>
CUTE_HOST_DEVICE constexpr auto rowcol(Layout l) {
  static_assert(rank(l) == 3 && rank<0>(l) == 3);
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)),
                     make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}

CUTE_DEVICE float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
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

template <class Mask>
CUTE_DEVICE Mask make_mask(const MaskLocal& m) {
  if constexpr (std::is_same_v<Mask, MaskLocal>) return m;
  else return Mask{};
}

// First key of KV tile n: n·N, except that the sequence's last tile ends at its last key.
template <int kBlockN>
CUTE_DEVICE int tile_first_key(int n, int sk) {
  return min(n * kBlockN, sk - kBlockN);
}

template <class Cfg, class Sched, class Mask, class Mod, class Sinks, class Kv>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_fwd_kernel(const __grid_constant__ FwdKernelParams<Cfg, Sched, Kv> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Element = typename Cfg::Element;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kD = Cfg::kHeadDim;
  constexpr int kDv = Cfg::kHeadDimV;
  using Pipeline = typename Cfg::Pipeline;
  using PipelineState = typename Cfg::PipelineState;

  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<SharedStorage<Cfg>*>(smem_raw);

  const int num_tiles = p.sched.num_tiles();
  const Mask mask = make_mask<Mask>(p.mask);
  const int warp_group = cutlass::canonical_warp_group_idx();
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  using PlainBarrier = cutlass::arch::ClusterBarrier;

  typename Pipeline::Params pp;
  pp.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = Cfg::kConsumerThreads;
  pp.transaction_bytes = Cfg::kBytesK;
  Pipeline pipe_k(ss.pipe_k, pp, Shape<_1, _1, _1>{});
  pp.transaction_bytes = Cfg::kBytesV;
  Pipeline pipe_v(ss.pipe_v, pp, Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    for (int i = 0; i < Cfg::kQStages; ++i) {
      Barrier::init(&ss.q_full[i], 1);
      // Arrivals that free a Q buffer: lane 0 of each consumer warp, after its last Q·Kᵀ of the tile.
      PlainBarrier::init(&ss.q_empty[i], Cfg::kConsumerThreads / cutlass::NumThreadsPerWarp);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  Tensor sQ = ss.tensor_q();
  Tensor sK = ss.tensor_k();
  Tensor sVt = ss.tensor_vt();

  if (warp_group == 0) {
    // ---------------- producer
    cutlass::arch::warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;

    Tensor mQ = p.tma_q.get_tma_tensor(make_shape(p.seqs.q_rows, Int<kD>{}, p.hq, p.q_batches));
    const int kv_rows = p.kv.tma_rows(p.seqs.k_rows);  // paged: one page's (sm90_kv.h)
    Tensor mK = p.tma_k.get_tma_tensor(make_shape(kv_rows, Int<kD>{}, p.hkv, p.k_batches));
    Tensor mVt = p.tma_v.get_tma_tensor(make_shape(Int<kDv>{}, kv_rows, p.hkv, p.k_batches));
    auto tma_q = p.tma_q.get_slice(0);
    auto tma_k = p.tma_k.get_slice(0);
    auto tma_v = p.tma_v.get_slice(0);
    Tensor tQs = tma_q.partition_D(sQ);  // (TMA, _, _, Q buffer)
    Tensor tKs = tma_k.partition_D(sK);  // (TMA, _, _, stage)
    Tensor tVs = tma_v.partition_D(sVt);
    // One TMA box per slab of a swizzle atom's width (64 columns at 16 bits, SmemLayoutVt): a
    // layout that cuts a stage into smaller boxes (32 per V tile once, 6-12% slower) fails here.
    // A partition's first mode is ((box), boxes per stage).
    static_assert(decltype(size<0, 1>(tKs))::value == kD / decltype(size<1>(typename Cfg::AtomK{}))::value &&
                      decltype(size<0, 1>(tVs))::value ==
                          kDv / decltype(size<0>(typename Cfg::AtomVt{}))::value,
                  "a K or V stage takes more TMA boxes than one per swizzle-atom slab");

    PipelineState st = cutlass::make_producer_start_state<Pipeline>();
    PipelineState st_v = cutlass::make_producer_start_state<Pipeline>();  // kKvLookahead only
    int q_loads = 0;
    for (int round = 0;; ++round) {
      const int t = p.sched.tile_index(blockIdx.x, round, gridDim.x);
      if (t >= num_tiles) break;
      const WorkTile w = p.sched.tile(t);
      const SeqInfo si = p.seqs.get(w.batch);
      if (w.m_block * kBlockM >= si.sq) continue;  // past this sequence's end (varlen)
      const KvTileRange kr = split_kv_range(kv_tile_range<kBlockM, kBlockN>(mask, w.m_block, si.sq, si.sk),
                                            w.split, p.sched.num_splits);
      if (kr.end <= kr.begin) continue;  // the consumers write this tile without reading anything
      const int kv_head = w.head / p.group;
      Tensor gQ = local_tile(domain_offset(make_coord(si.q_offset, _0{}), mQ(_, _, w.head, si.q_batch)),
                             typename Cfg::TileQ{}, make_coord(w.m_block, _0{}));
      Tensor tQg = tma_q.partition_S(gQ);
      // K then V of KV tile n, at the coordinates the KV policy gives; the tile's first
      // (last-in-sequence) K is followed by its Q. (The first tile is peeled off the loop so that
      // Q's coordinates are not live through it: the producer has 24 registers at D >= 128.)
      auto coord = [&](int n) CUTLASS_LAMBDA_FUNC_INLINE {
        return p.kv.template tile<kBlockN>(si, tile_first_key<kBlockN>(n, si.sk));
      };
      auto load_k = [&](KvTileCoord c) CUTLASS_LAMBDA_FUNC_INLINE {
        Tensor tKg = tma_k.partition_S(local_tile(
            domain_offset(make_coord(c.row, _0{}), mK(_, _, kv_head, c.outer)),
            typename Cfg::TileK{}, make_coord(_0{}, _0{})));
        pipe_k.producer_acquire(st);
        copy(p.tma_k.with(*pipe_k.producer_get_barrier(st)), tKg, tKs(_, _, _, st.index()));
      };
      auto load_v = [&](KvTileCoord c) CUTLASS_LAMBDA_FUNC_INLINE {
        Tensor tVg = tma_v.partition_S(local_tile(
            domain_offset(make_coord(_0{}, c.row), mVt(_, _, kv_head, c.outer)),
            typename Cfg::TileVt{}, make_coord(_0{}, _0{})));
        PipelineState& sv = Cfg::kKvLookahead ? st_v : st;
        pipe_v.producer_acquire(sv);
        copy(p.tma_v.with(*pipe_v.producer_get_barrier(sv)), tVg, tVs(_, _, _, sv.index()));
        ++sv;
      };
      int n = kr.end - 1;
      KvTileCoord c = coord(n);
      load_k(c);
      // Q goes after the tile's first K: K/V stages free up while the consumers still read the
      // Q buffer it refills, which is released only after the last Q·Kᵀ of its previous tile.
      {
        const int qb = q_loads % Cfg::kQStages;
        if (q_loads >= Cfg::kQStages) PlainBarrier::wait(&ss.q_empty[qb], (q_loads / Cfg::kQStages - 1) & 1);
        Barrier::arrive_and_expect_tx(&ss.q_full[qb], Cfg::kBytesQ);
        copy(p.tma_q.with(ss.q_full[qb]), tQg, tQs(_, _, _, qb));
      }
      ++q_loads;
      if constexpr (Cfg::kKvLookahead) {
        // K(n) then V(n+1): K and V keep their own pipeline states. (V's coordinates are asked
        // for again rather than kept: the producer has no registers to spare.)
        ++st;
        for (--n; n >= kr.begin; --n) {
          load_k(coord(n));
          ++st;
          load_v(coord(n + 1));
        }
        load_v(coord(kr.begin));
      } else {
        load_v(c);  // advances st for K and V together
        for (--n; n >= kr.begin; --n) {
          c = coord(n);
          load_k(c);
          load_v(c);
        }
      }
    }
    pipe_k.producer_tail(st);
    pipe_v.producer_tail(Cfg::kKvLookahead ? st_v : st);
    return;
  }

  // ---------------- consumers
  cutlass::arch::warpgroup_reg_alloc<Cfg::kConsumerRegs>();
  const int tidx = threadIdx.x - cutlass::NumThreadsPerWarpGroup;

  typename Cfg::TiledMmaS mma_s;
  typename Cfg::TiledMmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(tidx);
  auto thr_o = mma_o.get_thread_slice(tidx);

  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // descriptors (MMA, 1, K, Q buffer)
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // descriptors (MMA, 1, K, stage)
  Tensor tOrV = thr_o.partition_fragment_B(sVt);  // descriptors (MMA, 1, K, stage)
  Tensor tSrS = partition_fragment_C(mma_s, typename Cfg::TileS{});
  Tensor tOrO = partition_fragment_C(mma_o, typename Cfg::TileO{});
  // The same registers, as (row, col) and with each element's coordinate in the CTA tile.
  Tensor S = make_tensor(tSrS.data(), rowcol(tSrS.layout()));
  Tensor O = make_tensor(tOrO.data(), rowcol(tOrO.layout()));
  Tensor cS = thr_s.partition_C(make_identity_tensor(typename Cfg::TileS{}));
  Tensor cO = thr_o.partition_C(make_identity_tensor(typename Cfg::TileO{}));
  Tensor cSrc = make_tensor(cS.data(), rowcol(cS.layout()));
  Tensor cOrc = make_tensor(cO.data(), rowcol(cO.layout()));
  constexpr int kRows = decltype(size<0>(S))::value;  // 2
  static_assert(kRows == 2 && decltype(size<0>(O))::value == 2);

  // P in 16 bits as the A operand of O += P·V: an m64n(BlockN) accumulator ((2,2,N/8),1,1) holds
  // the same (row, key) pairs, in the same register order, as BlockN/16 A fragments of m64k16
  // ((2,2,2),1,N/16); only the layout changes.
  using PLayout = Layout<Shape<Shape<_2, _2, _2>, _1, Int<kBlockN / 16>>, Stride<Stride<_1, _2, _4>, _0, _8>>;
  static_assert(cosize(PLayout{}) == decltype(size(tSrS))::value);
  static_assert(decltype(stride<0, 0>(tSrS.layout()))::value == 1 &&
                decltype(stride<0, 1>(tSrS.layout()))::value == 2 &&
                decltype(stride<0, 2>(tSrS.layout()))::value == 4, "accumulator must be compact");
  Tensor tOrP = make_tensor<Element>(PLayout{});

  float row_max[kRows], row_sum[kRows];
  const Mod mod = Mod::make(p);
  const float scale_log2 = mod.factor;
  // The current work tile: its sequence's lengths are looked up again where needed (masked tiles,
  // epilogue) rather than kept live through the KV loop, which has no registers to spare.
  WorkTile w{};
  int row0 = 0;  // first query row of the current work tile
  // Its head and split for the epilogue. At D <= 128 packed (head · num_splits + split), so one
  // register carries both through the KV loop: d128 local_softcap spilled inside the KV loop with
  // two (ptxas, sm_90a). At D = 256 packing made the local variants spill more (2-3x the bytes),
  // so there they stay apart.
  constexpr bool kPackHeadSplit = kD <= 128;
  int head_split = 0, split_only = 0;

  // GEMM issue helpers: they only issue and commit one wgmma batch; the caller waits.
  int qb = 0;  // the current work tile's Q buffer
  auto issue_s = [&](int stage) CUTLASS_LAMBDA_FUNC_INLINE {
    mma_s.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(tSrS);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      gemm(mma_s, tSrQ(_, _, kb, Cfg::kQStages == 1 ? 0 : qb), tSrK(_, _, kb, stage), tSrS);
      mma_s.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
  };
  auto issue_o = [&](int stage) CUTLASS_LAMBDA_FUNC_INLINE {
    warpgroup_fence_operand(tOrO);
    warpgroup_fence_operand(tOrP);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tOrP); ++kb) gemm(mma_o, tOrP(_, _, kb), tOrV(_, _, kb, stage), tOrO);
    warpgroup_commit_batch();
  };

  // Online softmax of the S tile in registers (keys of KV tile n); returns per-row correction
  // factors for O and whether any is != 1.
  float corr[kRows];
  auto softmax = [&](int n, auto masked) CUTLASS_LAMBDA_FUNC_INLINE {
    mod.apply(S);
    if constexpr (decltype(masked)::value) {
      // Keys of this tile: from tile_first_key; those below n·N (the last tile's overlap with the
      // one before it) are hidden too.
      const SeqInfo si = p.seqs.get(w.batch);
      const int col0 = tile_first_key<kBlockN>(n, si.sk);
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const RowBounds rb = row_bounds(mask, row0 + get<0>(cSrc(r, 0)), si.sq, si.sk);
        const int lo = max(rb.lo, n * kBlockN);
        CUTE_UNROLL
        for (int c = 0; c < size<1>(S); ++c) {
          const int col = col0 + get<1>(cSrc(r, c));
          if (col < lo || col > rb.hi) S(r, c) = -INFINITY;
        }
      }
    }
    // Row max and row sum in kAcc interleaved partial chains: one chain of N/4 dependent FMNMX or
    // FADD per row sat on the softmax's critical path, which ping-pong must fit under the other
    // warpgroups' GEMMs.
    constexpr int kCols = decltype(size<1>(S))::value;
    constexpr int kAcc = 4;  // the combines below add and compare exactly four partials
    static_assert(kCols % kAcc == 0);
    bool rescale = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float part[kAcc];
      CUTE_UNROLL
      for (int a = 0; a < kAcc; ++a) part[a] = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) part[c % kAcc] = fmaxf(part[c % kAcc], S(r, c));
      float mx = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
      mx = quad_max(mx);
      // A row that has seen no visible key keeps max -inf; subtract 0 then so exp2 gives 0, not NaN.
      const float mx_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;
      corr[r] = mx == row_max[r] ? 1.f : exp2f(row_max[r] * scale_log2 - mx_scaled);
      rescale |= mx != row_max[r];
      row_max[r] = mx;
      CUTE_UNROLL
      for (int a = 0; a < kAcc; ++a) part[a] = 0.f;
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) {
        S(r, c) = exp2f(S(r, c) * scale_log2 - mx_scaled);
        part[c % kAcc] += S(r, c);
      }
      row_sum[r] = row_sum[r] * corr[r] + ((part[0] + part[1]) + (part[2] + part[3]));
    }
    return rescale;
  };
  auto rescale_o = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r)
      CUTE_UNROLL
      for (int c = 0; c < size<1>(O); ++c) O(r, c) *= corr[r];
  };
  // fp32 -> 16-bit, pairwise (both fragments are compact, so 1-D indices match).
  auto convert_p = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
    cutlass::NumericArrayConverter<Element, float, 2> cvt;
    CUTE_UNROLL
    for (int i = 0; i < size(tSrS); i += 2) {
      cutlass::Array<float, 2> a;
      a[0] = tSrS(i);
      a[1] = tSrS(i + 1);
      const cutlass::Array<Element, 2> b = cvt(a);
      tOrP(i) = b[0];
      tOrP(i + 1) = b[1];
    }
    warpgroup_fence_operand(tOrP);
  };
  // After this warp's last Q·Kᵀ of a tile completed: lane 0 frees Q for the producer.
  auto release_q = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
    if (threadIdx.x % cutlass::NumThreadsPerWarp == 0) PlainBarrier::arrive(&ss.q_empty[qb]);
  };

  // Ping-pong (round robin with three) between the consumer warpgroups: each issues its GEMMs
  // only in its turn (named barrier kTurn + wg, shared by that warpgroup and the one before it),
  // then hands the turn to the next, so one's softmax overlaps the others' GEMMs. Every "slot" (a
  // batch of GEMM issues) is bracketed by turn_begin / turn_end. All warpgroups walk the same
  // tiles with the same number of slots, so the turns rotate across tiles too. The last consumer
  // opens by handing consumer 0 the first turn; consumer 0 takes the hand-over that follows the
  // last consumer's very last slot after the tile loop, so every arrive is matched by a sync.
  constexpr int kWGs = Cfg::kConsumerWGs;
  constexpr int kTurnThreads = 2 * cutlass::NumThreadsPerWarpGroup;
  const int wg = tidx / cutlass::NumThreadsPerWarpGroup;
  const bool pingpong = p.pingpong != 0;
  auto turn_begin = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
    if (pingpong) cutlass::arch::NamedBarrier::sync(kTurnThreads, kTurnBarrier + wg);
  };
  auto turn_end = [&]() CUTLASS_LAMBDA_FUNC_INLINE {
    if (pingpong)
      cutlass::arch::NamedBarrier::arrive(kTurnThreads, kTurnBarrier + (wg + 1 == kWGs ? 0 : wg + 1));
  };

  PipelineState st_k, st_v;  // run on across tiles, like the producer's
  int q_loads = 0;
  for (int round = 0;; ++round) {
    const int t = p.sched.tile_index(blockIdx.x, round, gridDim.x);
    if (t >= num_tiles) break;
    w = p.sched.tile(t);
    row0 = w.m_block * kBlockM;
    if constexpr (kPackHeadSplit) {
      head_split = w.head * p.sched.num_splits.d + w.split;
    } else {
      head_split = w.head;
      split_only = w.split;
    }
    KvTileRange kr;
    {
      const SeqInfo si = p.seqs.get(w.batch);
      if (row0 >= si.sq) continue;  // past this sequence's end (varlen)
      kr = kv_tile_range<kBlockM, kBlockN>(mask, w.m_block, si.sq, si.sk);
      // Without a left edge the range starts at tile 0 with no masked tile below the full ones.
      if constexpr (!Mask::kLeftEdge) kr.begin = kr.full_begin = 0;
      // A split's share starts where it starts (full_begin == begin still holds without a left
      // edge); as the producer's.
      kr = split_kv_range(kr, w.split, p.sched.num_splits);
    }
    clear(tOrO);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }

    if (kr.end > kr.begin) {
      qb = Cfg::kQStages == 1 ? 0 : q_loads % Cfg::kQStages;
      Barrier::wait(&ss.q_full[qb], (q_loads / Cfg::kQStages) & 1);
      if (pingpong && wg == kWGs - 1 && q_loads == 0)
        cutlass::arch::NamedBarrier::arrive(kTurnThreads, kTurnBarrier + 0);
      ++q_loads;

      // Prologue: S for the first (last-in-sequence) tile, alone.
      int n = kr.end - 1;
      pipe_k.consumer_wait(st_k);
      turn_begin();
      issue_s(st_k.index());
      turn_end();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      pipe_k.consumer_release(st_k);
      ++st_k;
      if (n == kr.begin) release_q();
      // With a mask the first tile of a work tile is usually the one on its diagonal or window
      // edge (a split's share may start on a fully visible one, where the masked softmax gives
      // the same result), so it takes the masked softmax without asking: the kernel carries one
      // copy of the unrolled softmax fewer, as fast on the FA3 shapes. The no-mask variants,
      // whose first tile is mostly fully visible, measured slower that way (mask arithmetic on
      // every work tile), so those keep asking.
      if (!std::is_same_v<Mask, MaskNone> || kr.needs_mask(n)) softmax(n, cute::true_type{});
      else softmax(n, cute::false_type{});
      bool rescale = false;  // O is still zero: its correction factors change nothing
      convert_p();

      // Steady state: S(n) = Q·K(n)ᵀ and O += P(n+1)·V(n+1) in flight together; the softmax of
      // S(n) runs while the P·V GEMM still works. O's rescale for P(n+1) (factors from the
      // previous softmax) runs before P·V reads O: in the shadow of the Q·K(n)ᵀ GEMM, or, at
      // D=128, already at the end of the previous step (FwdConfig::kRescaleInTurn).
      auto step = [&](int n, auto masked) CUTLASS_LAMBDA_FUNC_INLINE {
        pipe_k.consumer_wait(st_k);
        pipe_v.consumer_wait(st_v);
        turn_begin();
        issue_s(st_k.index());
        if (Cfg::kRescaleInTurn && rescale) rescale_o();
        issue_o(st_v.index());
        turn_end();
        warpgroup_wait<1>();
        warpgroup_fence_operand(tSrS);
        pipe_k.consumer_release(st_k);
        ++st_k;
        if (n == kr.begin) release_q();
        rescale = softmax(n, masked);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        pipe_v.consumer_release(st_v);
        ++st_v;
        convert_p();
        if (!Cfg::kRescaleInTurn && rescale) rescale_o();  // O's last P·V has completed
      };
      for (--n; n >= kr.begin && n >= kr.full_end; --n) step(n, cute::true_type{});
      if constexpr (Mask::kLeftEdge) {
        for (; n >= kr.full_begin; --n) step(n, cute::false_type{});
        for (; n >= kr.begin; --n) step(n, cute::true_type{});
      } else {
        for (; n >= kr.begin; --n) step(n, cute::false_type{});
      }

      // Epilogue of the loop: the last P·V.
      pipe_v.consumer_wait(st_v);
      turn_begin();
      if (Cfg::kRescaleInTurn && rescale) rescale_o();
      issue_o(st_v.index());
      turn_end();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      pipe_v.consumer_release(st_v);
      ++st_v;
    }
    // ---------------- epilogue of the tile
    const SeqInfo si = p.seqs.get(w.batch);
    int head = head_split, split = split_only;
    if constexpr (kPackHeadSplit) p.sched.num_splits.divmod(head_split, head, split);
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
  // The last consumer's last slot handed the turn to consumer 0; take it so no arrive is left
  // pending.
  if (pingpong && wg == 0 && q_loads > 0) cutlass::arch::NamedBarrier::sync(kTurnThreads, kTurnBarrier + 0);
#endif
}

}  // namespace attnkit::gpu::sm90
