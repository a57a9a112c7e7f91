// The Hopper prefill kernel's compile-time configuration and shared declarations
// (sm90_fwd_kernel.cuh): a variant's tiles, shared-memory layouts, MMAs and TMA types
// (FwdConfig), its shared storage, its launch parameters, and small helpers of its roles.
#pragma once

#include <cuda_runtime.h>

// The WGMMA shapes whose N is not a power-of-two multiple of 8 (m64n80, m64n176, ...) are behind
// this switch; without them CuTe's op selector silently splits such a KV tile into m64n16 pieces.
// It must come before the first CuTe include of the translation unit (the sm90 prefill headers
// include this one first).
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
  // split-KV combine (common/combine_kernel.cuh) reads; O and LSE are then not written here.
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

}  // namespace attnkit::gpu::sm90
