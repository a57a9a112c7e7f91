// The consumer role of the Hopper prefill kernel (sm90_fwd_kernel.cuh): the WGMMA main loop with
// its ping-pong turns, the online softmax (sm90_fwd_softmax.cuh) and the epilogue
// (sm90_fwd_epilogue.cuh).
#pragma once

#include "cuda/attention/sm90/sm90_fwd_config.cuh"
#include "cuda/attention/sm90/sm90_fwd_epilogue.cuh"
#include "cuda/attention/sm90/sm90_fwd_softmax.cuh"

namespace attnkit::gpu::sm90 {

using namespace cute;

// The consumer warpgroups, after taking their registers: per work tile of this CTA, S = Q·Kᵀ
// and O += P·V on WGMMA over its KV tiles (last first) with the online softmax between them,
// taking turns with the other consumer warpgroups (ping-pong), then the tile's epilogue.
template <class Cfg, class Sched, class Mask, class Mod, class Sinks, class Kv>
CUTE_DEVICE void consume(const FwdKernelParams<Cfg, Sched, Kv>& p, SharedStorage<Cfg>& ss,
                         typename Cfg::Pipeline& pipe_k, typename Cfg::Pipeline& pipe_v,
                         const Mask& mask, int num_tiles) {
  using Element = typename Cfg::Element;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  using PipelineState = typename Cfg::PipelineState;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  using PlainBarrier = cutlass::arch::ClusterBarrier;
  Tensor sQ = ss.tensor_q();
  Tensor sK = ss.tensor_k();
  Tensor sVt = ss.tensor_vt();
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
  constexpr bool kPackHeadSplit = Cfg::kHeadDim <= 128;
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
    return online_softmax(S, row_max, row_sum, corr, scale_log2);
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
    store_tile<Cfg, Sinks>(p, O, cOrc, row_max, row_sum, scale_log2, si, row0, head, split, tidx);
  }
  // The last consumer's last slot handed the turn to consumer 0; take it so no arrive is left
  // pending.
  if (pingpong && wg == 0 && q_loads > 0) cutlass::arch::NamedBarrier::sync(kTurnThreads, kTurnBarrier + 0);
}

}  // namespace attnkit::gpu::sm90
