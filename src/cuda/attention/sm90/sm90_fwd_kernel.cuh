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

#include "cuda/attention/sm90/sm90_fwd_config.cuh"
#include "cuda/attention/sm90/sm90_fwd_consumer.cuh"
#include "cuda/attention/sm90/sm90_fwd_producer.cuh"

namespace attnkit::gpu::sm90 {

using namespace cute;

template <class Cfg, class Sched, class Mask, class Mod, class Sinks, class Kv>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_fwd_kernel(const __grid_constant__ FwdKernelParams<Cfg, Sched, Kv> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Pipeline = typename Cfg::Pipeline;

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

  if (warp_group == 0) {
    // ---------------- producer
    cutlass::arch::warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;
    produce<Cfg>(p, ss, pipe_k, pipe_v, mask, num_tiles);
    return;
  }

  // ---------------- consumers
  cutlass::arch::warpgroup_reg_alloc<Cfg::kConsumerRegs>();
  consume<Cfg, Sched, Mask, Mod, Sinks>(p, ss, pipe_k, pipe_v, mask, num_tiles);
#endif
}

}  // namespace attnkit::gpu::sm90
