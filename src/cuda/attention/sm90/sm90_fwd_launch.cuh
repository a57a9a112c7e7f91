// Host side of the Hopper prefill: TMA descriptors, kernel parameters, launch. Included only by the
// instantiation TUs (src/cuda/instantiations/sm90_fwd_d*.cu), which exist in sm_90a builds only.
//
// The TMA descriptors are encoded by CuTe through cuTensorMapEncodeTiled, which CUTLASS reaches
// through the runtime's cudaGetDriverEntryPoint (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL is left
// undefined), so the library never links libcuda.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"
#include "cuda/common/cuda_check.h"
#include "cuda/instantiations/sm90_fwd_list.h"

#if defined(ATTNKIT_HAS_SM90A)
#if defined(CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL)
#error "attnkit must not call the CUDA driver directly (libattnkit must load without libcuda)"
#endif
#include "cuda/attention/sm90/sm90_fwd_kernel.cuh"

namespace attnkit::gpu::sm90 {

template <class Cfg, class Sched, class Mask, class Mod, class Sinks, class Kv>
Status launch_fwd(const Sm90FwdArgs& a, cudaStream_t stream) {
  constexpr int kHeadDim = Cfg::kHeadDim;
  // The split planner (sm90_split_plan.h) counts work tiles of sm90_q_block rows. The pair
  // scheduler (128-row tiles at d64) never runs split: the dispatcher picks it only unsplit.
  constexpr bool kPairs = std::is_same_v<Sched, PersistentCausalPairScheduler>;
  static_assert(kPairs || Cfg::kBlockM == sm90_q_block(kHeadDim),
                "the split planner (sm90_split_plan.h) counts work tiles of sm90_q_block rows");
  if (kPairs && a.num_splits > 1)
    return Status::Invalid("sm90 attention: the causal pair scheduler does not take split-KV");
  using Element = typename Cfg::Element;
  using Params = FwdKernelParams<Cfg, Sched, Kv>;
  Kv kv;
  if constexpr (Kv::kPaged) {
    // a.sk is the page size here (Sm90FwdArgs); a tile must never span two pages.
    if (a.page_table == nullptr || a.seqused_k == nullptr || a.k_batches < 1 || a.max_pages < 1 ||
        a.sk % Cfg::kBlockN != 0)
      return Status::Invalid("sm90 attention (paged): needs a page table, seqused_k, at least one "
                             "page and a page size that is a multiple of " +
                             std::to_string(Cfg::kBlockN));
    kv.page_table = a.page_table;
    kv.pt_batch_stride = a.pt_batch_stride;
    kv.pt_col_stride = a.pt_col_stride;
    kv.page_size = FastDiv(a.sk);
    kv.num_pages = a.k_batches;
  }
  // TMA wants every global stride a multiple of 16 bytes, even for extents of 1 whose stride is
  // never used: those get the (already aligned) row stride.
  auto fix = [](int64_t stride, int extent, int64_t row) { return extent == 1 ? row : stride; };
  auto q = make_tensor(make_gmem_ptr(static_cast<const Element*>(a.q)),
                       make_shape(a.sq, Int<kHeadDim>{}, a.hq, a.q_batches),
                       make_stride(a.q_row, _1{}, fix(a.q_head, a.hq, a.q_row),
                                   fix(a.q_batch, a.q_batches, a.q_row)));
  auto k = make_tensor(make_gmem_ptr(static_cast<const Element*>(a.k)),
                       make_shape(a.sk, Int<kHeadDim>{}, a.hkv, a.k_batches),
                       make_stride(a.k_row, _1{}, fix(a.k_head, a.hkv, a.k_row),
                                   fix(a.k_batch, a.k_batches, a.k_row)));
  auto vt = make_tensor(make_gmem_ptr(static_cast<const Element*>(a.v)),
                        make_shape(Int<Cfg::kHeadDimV>{}, a.sk, a.hkv, a.k_batches),
                        make_stride(_1{}, a.v_row, fix(a.v_head, a.hkv, a.v_row),
                                    fix(a.v_batch, a.k_batches, a.v_row)));
  SeqLens seqs;
  seqs.q_rows = a.sq;
  // Paged: keys per sequence are bounded by its page-table row.
  seqs.k_rows = Kv::kPaged ? a.max_pages * a.sk : a.sk;
  seqs.cu_q = a.cu_seqlens_q, seqs.cu_q_stride = static_cast<int>(a.cu_q_stride);
  seqs.cu_k = a.cu_seqlens_k, seqs.cu_k_stride = static_cast<int>(a.cu_k_stride);
  seqs.used_k = a.seqused_k, seqs.used_k_stride = static_cast<int>(a.seqused_k_stride);
  WithVarlen<Sched> sched;
  // The varlen scheduler only when Q is ragged: with batched Q (per-sequence keys: ragged K,
  // seqused_k, paged) the query tiles are the variant's own grid, only their key counts differ.
  sched.use_varlen = seqs.cu_q != nullptr ? 1 : 0;
  sched.fixed.num_m_blocks = (a.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  sched.fixed.num_heads = a.hq;
  sched.fixed.num_batch = a.batch;
  sched.varlen.num_m_blocks = (a.max_seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  sched.varlen.num_heads = a.hq;
  sched.varlen.num_batch = a.batch;
  if (a.num_splits < 1 || a.num_splits > kSm90MaxSplits ||
      (a.num_splits > 1 && (a.part_o == nullptr || a.part_lse == nullptr || a.part_rows < 1)))
    return Status::Invalid("sm90 attention: num_splits must be in [1, " +
                           std::to_string(kSm90MaxSplits) +
                           "], and more than one split needs the partial O / LSE workspace");
  sched.num_splits = FastDiv(a.num_splits);
  const int m_blocks = sched.use_varlen ? sched.varlen.num_m_blocks : sched.fixed.num_m_blocks;
  const int64_t num_tiles = int64_t{m_blocks} * a.hq * a.batch * a.num_splits;
  if (num_tiles == 0) return Status::Ok();
  if (num_tiles >= (int64_t{1} << 30))
    return Status::Unsupported("sm90 attention: 2^30 or more work tiles (splits included)");
  // The scheduler sizes the grid: persistent (one CTA per SM, as shared memory allows no more)
  // or one CTA per tile.
  const int sms = a.sm_count;
  if (sms < 1) return Status::Invalid("sm90 attention: the device's SM count must be set (sm_count)");
  MaskLocal mask;
  mask.left = a.window_left, mask.right = a.window_right, mask.chunk = a.chunk_size;
  Params p{make_tma_copy(SM90_TMA_LOAD{}, q, take<0, 2>(typename Cfg::SmemLayoutQ{})),
           make_tma_copy(SM90_TMA_LOAD{}, k, take<0, 2>(typename Cfg::SmemLayoutK{})),
           make_tma_copy(SM90_TMA_LOAD{}, vt, take<0, 2>(typename Cfg::SmemLayoutVt{})),
           static_cast<Element*>(a.o), a.o_batch, a.o_row, a.o_head,
           a.lse, a.lse_batch, a.lse_row, a.lse_head,
           a.q_batches, a.k_batches, a.hq, a.hkv, a.hq / a.hkv, sched,
           a.pingpong ? 1 : 0, seqs, mask, a.scale, a.softcap, a.sinks, a.sinks_stride, kv,
           a.num_splits > 1 ? a.part_o : nullptr, a.part_lse, a.part_rows};

  auto kernel = &sm90_fwd_kernel<Cfg, Sched, Mask, Mod, Sinks, Kv>;
  constexpr int kSmem = static_cast<int>(sizeof(SharedStorage<Cfg>));
  static_assert(kSmem <= 227 * 1024, "shared memory exceeds the 227 KB a Hopper CTA can have");
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(sched.grid(static_cast<int>(num_tiles), sms)));
  kernel<<<grid, Cfg::kThreads, kSmem, stream>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("sm90_fwd_kernel");
  return Status::Ok();
}

// The variant's configuration and scheduler (sm90_tile_scheduler.h); a varlen launch uses the
// varlen scheduler whatever the variant's (WithVarlen). Masked variants (causal, local) share the
// causal tile configuration and scheduler: their tiles differ in cost. The causal variants (d64,
// d128, d256, contiguous K/V) run on the pair scheduler when the plan asks (causal_pairs: short
// and mid lengths, sm90_dispatch.cu), at d64 with two consumer warpgroups (128-row tiles waste
// less of the diagonal than 192-row ones).
// kBlockN: the KV tile, 0 for the configuration's default (none_n80 asks for 80, with the
// default two consumer warpgroups and two stages). Dqk = 192 / Dv = 128: two stages of 128 keys
// (Q 48 KB + 2 x (K 48 KB + V 32 KB) = 208 KB of shared memory); registers as at 128 (O takes
// Dv/2, S N/2 per thread).
template <class Element, int kHeadDim, int kHeadDimV, class Mask, class Mod, class Sinks, class Kv,
          int kBlockN = 0>
Status run_fwd(const Sm90FwdArgs& a, cudaStream_t stream) {
  constexpr bool kCausal = !std::is_same_v<Mask, MaskNone>;
  // Two Q buffers (FwdConfig::kQStages) for the d64 causal variant only: measured faster there on
  // the FA3 shapes, but not without a mask, and at d128 the room for a second Q costs a KV stage,
  // which measured slower. Not measured: local, paged, d96.
  constexpr int kQStages =
      kHeadDim == 64 && kHeadDimV == 64 && std::is_same_v<Mask, MaskCausal> && !Kv::kPaged ? 2 : 1;
  using Cfg = std::conditional_t<
      kHeadDim != kHeadDimV,
      FwdConfig<Element, kHeadDim, kCausal, 2, sm90_kv_block(kHeadDim), 2, kHeadDimV>,
      std::conditional_t<kBlockN == 0,
                         FwdConfig<Element, kHeadDim, kCausal, sm90_consumer_wgs(kHeadDim),
                                   sm90_kv_block(kHeadDim), sm90_kv_stages(kHeadDim), kHeadDimV, kQStages>,
                         FwdConfig<Element, kHeadDim, kCausal, 2, kBlockN, 2>>>;
  if constexpr (std::is_same_v<Mask, MaskCausal> && !Kv::kPaged && kHeadDim == kHeadDimV &&
                (kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256)) {
    if (a.causal_pairs) {
      using PairCfg = std::conditional_t<
          kHeadDim == 64,
          FwdConfig<Element, 64, true, 2, sm90_kv_block(64), sm90_kv_stages(64), 64, kQStages>, Cfg>;
      return launch_fwd<PairCfg, PersistentCausalPairScheduler, Mask, Mod, Sinks, Kv>(a, stream);
    }
  }
  return launch_fwd<Cfg, SchedulerFor<kHeadDim, kCausal>, Mask, Mod, Sinks, Kv>(a, stream);
}

}  // namespace attnkit::gpu::sm90

#define ATTNKIT_SM90_ELEMENT_bf16 cutlass::bfloat16_t
#define ATTNKIT_SM90_ELEMENT_fp16 cutlass::half_t
// Each variant name of sm90_fwd_list.h -> (mask, score mod, sinks, KV operand) policy types.
#define ATTNKIT_SM90_POLICIES_none sm90::MaskNone, sm90::ScoreNone, sm90::SinkNone, sm90::KvContiguous
#define ATTNKIT_SM90_POLICIES_causal sm90::MaskCausal, sm90::ScoreNone, sm90::SinkNone, sm90::KvContiguous
#define ATTNKIT_SM90_POLICIES_local sm90::MaskLocal, sm90::ScoreNone, sm90::SinkNone, sm90::KvContiguous
#define ATTNKIT_SM90_POLICIES_local_softcap \
  sm90::MaskLocal, sm90::ScoreSoftcap, sm90::SinkNone, sm90::KvContiguous
#define ATTNKIT_SM90_POLICIES_local_sinks \
  sm90::MaskLocal, sm90::ScoreNone, sm90::SinkLearned, sm90::KvContiguous
#define ATTNKIT_SM90_POLICIES_paged_none sm90::MaskNone, sm90::ScoreNone, sm90::SinkNone, sm90::KvPaged
#define ATTNKIT_SM90_POLICIES_paged_causal sm90::MaskCausal, sm90::ScoreNone, sm90::SinkNone, sm90::KvPaged
#define ATTNKIT_SM90_POLICIES_paged_local sm90::MaskLocal, sm90::ScoreNone, sm90::SinkNone, sm90::KvPaged
#define ATTNKIT_SM90_POLICIES_none_n80 \
  sm90::MaskNone, sm90::ScoreNone, sm90::SinkNone, sm90::KvContiguous, 80

#define ATTNKIT_DEFINE_SM90_FWD(D, DT, MASK)                                          \
  namespace attnkit::gpu {                                                            \
  Status sm90_fwd_d##D##_##DT##_##MASK(const Sm90FwdArgs& a, cudaStream_t stream) {   \
    return sm90::run_fwd<ATTNKIT_SM90_ELEMENT_##DT, ATTNKIT_SM90_DIMS_##D,            \
                         ATTNKIT_SM90_POLICIES_##MASK>(a, stream);                    \
  }                                                                                   \
  }

#else  // no sm_90a target in this build: the dispatcher never calls these.

#define ATTNKIT_DEFINE_SM90_FWD(D, DT, MASK)                                          \
  namespace attnkit::gpu {                                                            \
  Status sm90_fwd_d##D##_##DT##_##MASK(const Sm90FwdArgs&, cudaStream_t) {            \
    return Status::Unsupported("this attnkit build has no sm_90a target");             \
  }                                                                                   \
  }

#endif
