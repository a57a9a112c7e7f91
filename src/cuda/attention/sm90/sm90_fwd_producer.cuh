// The producer role of the Hopper prefill kernel (sm90_fwd_kernel.cuh).
#pragma once

#include "cuda/attention/sm90/sm90_fwd_config.cuh"

namespace attnkit::gpu::sm90 {

using namespace cute;

// The producer: one thread issuing, per work tile of this CTA, the TMA loads of its KV tiles (last
// first) into the K and V pipelines, and of its Q after the first K (sm90_kv.h says where a tile
// is read from). Returns once every load is issued and the pipelines are drained.
template <class Cfg, class Sched, class Mask, class Kv>
CUTE_DEVICE void produce(const FwdKernelParams<Cfg, Sched, Kv>& p, SharedStorage<Cfg>& ss,
                         typename Cfg::Pipeline& pipe_k, typename Cfg::Pipeline& pipe_v,
                         const Mask& mask, int num_tiles) {
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kD = Cfg::kHeadDim;
  constexpr int kDv = Cfg::kHeadDimV;
  using Pipeline = typename Cfg::Pipeline;
  using PipelineState = typename Cfg::PipelineState;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  using PlainBarrier = cutlass::arch::ClusterBarrier;
  Tensor sQ = ss.tensor_q();
  Tensor sK = ss.tensor_k();
  Tensor sVt = ss.tensor_vt();

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
}

}  // namespace attnkit::gpu::sm90
