// Stage 5 alone on Hopper (sm_90a), the public gdn_chunk_output op:
//   O = scale (exp(g) (.) (Q h_c) + tril(Q K^T (.) Gamma) V_new),
// with TMA tile loads into mbarrier rings and WGMMA products (kernel and launcher; output_sm90.cu
// dispatches). Same math and rounding as gdn_output.cuh (the mma.sync kernel, which other GPUs,
// fp32 intermediates and unaligned tensors get): Q h and P V_new with 16-bit operands and fp32
// accumulation, P rounded to 16 bits, O scaled per row by exp(g) between the two products.
//
// Why this shape: the stage is a stream. Per (chunk, value head) it reads h (32 KB) and V_new
// (16 KB) and writes O (16 KB); Q and K (16 KB each) belong to the q/k head, shared by HV / H value
// heads; the tensor work (~3.6 MFLOP) is a fraction of the memory time. What counts is how many
// bytes each SM keeps in flight and that nothing is read twice. So:
// - one CTA per SM walks a contiguous share of the stages (chunk, q/k head, value head of its
//   group), shares balanced to one stage; a q/k head's value heads follow each other, so Q, K and
//   the raw Q K^T are loaded and computed once per (chunk, q/k head);
// - a producer warp loads each stage's h (128 x 128) and V_new (64 x 128) as TMA tiles into a
//   kStages-deep ring (2 x 48 KB in flight per SM: output_sm90.cu), the stage's gates by plain
//   loads (any stride), and Q, K once per (chunk, q/k head) into a two-deep ring of their own;
// - one consumer warpgroup: Q K^T (kept in registers across the group), then per stage O = Q h
//   (SS WGMMA, asynchronous while P = tril(Q K^T (.) Gamma) is built from those registers as the
//   A operand), O scaled by exp(g) per row, O += P V_new (RS WGMMA); the ring slot goes back before
//   O leaves from registers as 16-byte row pieces, rows < len only.
// Measured (gdn_bench, T = 16k, H = 16, HV = 32) near the device copy's rate for the bytes the
// stage must move, well ahead of the mma.sync kernel.
// Rows past a chunk's len (the next sequence's rows, or TMA's zeros past the tensor) only reach O
// rows that are not stored, except through P V_new, where P is 0 but 0 x NaN need not be 0: V_new
// rows past len are zeroed in shared memory (the last chunk of a sequence only).
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>

#include <cstdint>

#include "attnkit/status.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/named_barrier.cuh"
#include "cuda/gdn/gdn_intra_sm90.cuh"

namespace attnkit::gdn_cuda::sm90 {

using namespace cute;

template <class E, int kStages_>
struct OutCfg {
  using Element = E;
  static constexpr int kStages = kStages_;
  static constexpr int kConsumers = 128;              // one warpgroup (warps 0-3)
  static constexpr int kThreads = kConsumers + 32;    // and the producer warp
  // Q, K as (row, key), keys contiguous: the TMA box and the K-major A / B of Q K^T and Q h.
  using LayRows = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, _128>{}));
  // h as (value, key) and V_new as (value, row), values contiguous: MN-major B of Q h and P V_new.
  // Step<_2, _1> keeps each 64-value half whole (as CUTLASS's MN-major B), one TMA box per half.
  using LayH = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<E>{}, Shape<_128, _128>{}, Step<_2, _1>{}));
  using LayV = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<E>{}, Shape<_128, _64>{}, Step<_2, _1>{}));
  using MmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, _64, _128>, GMMA::Major::K, GMMA::Major::K>()));
  using MmaQH = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, _128, _128>, GMMA::Major::K, GMMA::Major::MN>()));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<E, E, float, Shape<_64, _128, _64>, GMMA::Major::K, GMMA::Major::MN>()));
  // Global tensors as TMA sees them: q/k (rows, 128, heads, batch); V_new (128, rows, heads, batch);
  // h (128 values, 128 keys, heads, chunks).
  using GRows = decltype(make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)),
                                     Shape<int32_t, _128, int32_t, int32_t>{}, Stride<int64_t, _1, int64_t, int64_t>{}));
  using GCols = decltype(make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)),
                                     Shape<_128, int32_t, int32_t, int32_t>{}, Stride<_1, int64_t, int64_t, int64_t>{}));
  using GH = decltype(make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)), Shape<_128, _128, int32_t, int32_t>{},
                                  Stride<_1, int64_t, int64_t, int64_t>{}));
  using TmaRows = decltype(make_tma_copy(SM90_TMA_LOAD{}, GRows{}, LayRows{}));
  using TmaV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GCols{}, LayV{}));
  using TmaH = decltype(make_tma_copy(SM90_TMA_LOAD{}, GH{}, LayH{}));
  static constexpr uint32_t kQKBytes = 2 * 64 * 128 * sizeof(E);
  static constexpr uint32_t kStageBytes = (128 * 128 + 64 * 128) * sizeof(E);
};

template <class Cfg>
struct OutSmem90 {
  using E = typename Cfg::Element;
  static constexpr int S = Cfg::kStages;
  cute::array_aligned<E, 64 * 128, 1024> q[2], k[2];
  cute::array_aligned<E, 128 * 128, 1024> h[S];
  cute::array_aligned<E, 64 * 128, 1024> v[S];
  float g[S][kChunk];  // the stage's gates, 0 past len
  int4 meta[S];        // the stage's first row, batch entry, len, value head
  alignas(8) uint64_t qk_full[2], qk_empty[2], full[S], empty[S];
};

template <class Cfg>
struct OutSm90Params {
  typename Cfg::TmaRows tma_q, tma_k;
  typename Cfg::TmaV tma_v;
  typename Cfg::TmaH tma_h;
  SeqLayout L;
  Tok g;  // fp32 [B, T, HV], any strides
  typename Cfg::Element* o;
  int64_t o_sb, o_st, o_sh;
  int rows, batches, H, HV, group;
  int64_t h_rows;  // chunks h holds: later chunks are not computed (as the mma.sync kernel)
  float scale;
};

constexpr int kOutBarWG = 1;  // named barrier of the consumer warpgroup

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) output_sm90_kernel(const __grid_constant__ OutSm90Params<Cfg> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using E = typename Cfg::Element;
  constexpr int S = Cfg::kStages;
  using FullBar = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBar = cutlass::arch::ClusterBarrier;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<OutSmem90<Cfg>*>(smem_raw);

  // Stages u = (chunk * H + q/k head) * group + i; this CTA's share is [u0, u1).
  int64_t chunks = p.L.varlen ? int64_t{p.L.chunk_off[p.L.N]} : int64_t{p.L.N} * chunks_per_dense_seq(p.L.T);
  if (chunks > p.h_rows) chunks = p.h_rows;
  const int64_t total = chunks * p.HV;
  const int64_t u0 = total * blockIdx.x / gridDim.x, u1 = total * (blockIdx.x + 1) / gridDim.x;
  if (u0 >= u1) return;  // uniform: before any barrier
  const int G = p.group;

  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      FullBar::init(&ss.qk_full[s], 1);
      EmptyBar::init(&ss.qk_empty[s], Cfg::kConsumers / 32);
    }
    for (int s = 0; s < S; ++s) {
      FullBar::init(&ss.full[s], 1 + 32);  // the TMA bytes, and each producer lane's gate stores
      EmptyBar::init(&ss.empty[s], Cfg::kConsumers / 32);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // The role as a value the compiler knows to be warp-uniform (a shuffled one): a role branch it
  // must treat as divergent makes ptxas serialise every WGMMA in it.
  const int role = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / Cfg::kConsumers, 0);
  if (role == 1) {
    // ---------------- producer warp
    const int lane = threadIdx.x % 32;
    Tensor mQ = p.tma_q.get_tma_tensor(make_shape(p.rows, _128{}, p.H, p.batches));
    Tensor mK = p.tma_k.get_tma_tensor(make_shape(p.rows, _128{}, p.H, p.batches));
    Tensor mV = p.tma_v.get_tma_tensor(make_shape(_128{}, p.rows, p.HV, p.batches));
    Tensor mH = p.tma_h.get_tma_tensor(make_shape(_128{}, _128{}, p.HV, static_cast<int>(p.h_rows)));
    auto tq = p.tma_q.get_slice(0);
    auto tk = p.tma_k.get_slice(0);
    auto tv = p.tma_v.get_slice(0);
    auto th = p.tma_h.get_slice(0);
    const float* gp = static_cast<const float*>(p.g.p);
    int64_t at_chunk = -1;
    ChunkPos c{};
    int pairs = 0;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t pair = u / G, chunk = pair / p.H;
      const int i = static_cast<int>(u % G), hq = static_cast<int>(pair % p.H), hv = hq * G + i;
      if (chunk != at_chunk) {  // chunks only grow along the share: one lookup per chunk
        if (!locate_chunk(p.L, chunk, &c)) c = ChunkPos{0, 0, 0, 0, 0, 0};  // not reached: no rows stored
        at_chunk = chunk;
      }
      const int row0 = static_cast<int>(c.row0), batch = static_cast<int>(c.batch);
      if (u == u0 || i == 0) {
        const int slot = pairs & 1;
        if (pairs >= 2) EmptyBar::wait(&ss.qk_empty[slot], ((pairs >> 1) - 1) & 1);
        if (lane == 0) {
          FullBar::arrive_and_expect_tx(&ss.qk_full[slot], Cfg::kQKBytes);
          auto tile = [&](auto& m) {
            return local_tile(domain_offset(make_coord(row0, _0{}), m(_, _, hq, batch)), Shape<_64, _128>{},
                              make_coord(_0{}, _0{}));
          };
          Tensor sQ = make_tensor(make_smem_ptr(ss.q[slot].data()), typename Cfg::LayRows{});
          Tensor sK = make_tensor(make_smem_ptr(ss.k[slot].data()), typename Cfg::LayRows{});
          copy(p.tma_q.with(ss.qk_full[slot]), tq.partition_S(tile(mQ)), tq.partition_D(sQ));
          copy(p.tma_k.with(ss.qk_full[slot]), tk.partition_S(tile(mK)), tk.partition_D(sK));
        }
        ++pairs;
      }
      const int64_t k = u - u0;
      const int s = static_cast<int>(k % S);
      if (k >= S) EmptyBar::wait(&ss.empty[s], ((k / S) - 1) & 1);
      if (lane == 0) {
        FullBar::arrive_and_expect_tx(&ss.full[s], Cfg::kStageBytes);
        Tensor gH = local_tile(mH(_, _, hv, static_cast<int>(chunk)), Shape<_128, _128>{}, make_coord(_0{}, _0{}));
        Tensor gV = local_tile(domain_offset(make_coord(_0{}, row0), mV(_, _, hv, batch)), Shape<_128, _64>{},
                               make_coord(_0{}, _0{}));
        Tensor sH = make_tensor(make_smem_ptr(ss.h[s].data()), typename Cfg::LayH{});
        Tensor sV = make_tensor(make_smem_ptr(ss.v[s].data()), typename Cfg::LayV{});
        copy(p.tma_h.with(ss.full[s]), th.partition_S(gH), th.partition_D(sH));
        copy(p.tma_v.with(ss.full[s]), tv.partition_S(gV), tv.partition_D(sV));
        ss.meta[s] = make_int4(row0, batch, c.len, hv);
      }
      // The gates: plain loads (the stage op takes any g_cum strides), each lane's stores
      // released by its own arrival on the full barrier.
      CUTE_UNROLL
      for (int r = lane; r < kChunk; r += 32)
        ss.g[s][r] = r < c.len ? gp[int64_t{batch} * p.g.sb + int64_t{row0 + r} * p.g.st + int64_t{hv} * p.g.sh] : 0.f;
      FullBar::arrive(&ss.full[s]);
    }
  } else {
    // ---------------- consumer warpgroup
    const int tidx = threadIdx.x, lane = tidx % 32;
    typename Cfg::MmaQK mma_qk;
    typename Cfg::MmaQH mma_qh;
    typename Cfg::MmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(tidx);
    auto thr_qh = mma_qh.get_thread_slice(tidx);
    auto thr_pv = mma_pv.get_thread_slice(tidx);
    Tensor accS = partition_fragment_C(mma_qk, Shape<_64, _64>{});   // raw Q K^T
    Tensor accO = partition_fragment_C(mma_qh, Shape<_64, _128>{});  // O
    Tensor cS = thr_qk.partition_C(make_identity_tensor(Shape<_64, _64>{}));
    check_acc_layout(accS);
    check_acc_layout(accO);
    static_assert(decltype(size(accS))::value == 32 && decltype(size(accO))::value == 64);
    // P as the register A operand of P V_new: for k-block kb (columns 16 kb .. 16 kb + 15) the
    // m64n16k16 A fragment holds exactly accumulator elements 8 kb .. 8 kb + 7 of Q K^T, in order
    // (GMMA's ALayout_64x16 and CLayout_64xN place rows, column pairs and 8-column blocks alike),
    // so P is built element for element in a compact ((2, 2, 2), 1, 4) fragment.
    Tensor tPa = make_tensor<E>(Layout<Shape<Shape<_2, _2, _2>, _1, _4>>{});
    const int acc_r0 = get<0>(cS(0)), acc_t = get<1>(cS(0)) / 2;
    auto release = [&](uint64_t& bar) {
      __syncwarp();
      if (lane == 0) EmptyBar::arrive(&bar);
    };

    int pairs = 0;
    for (int64_t u = u0; u < u1; ++u) {
      const int i = static_cast<int>(u % G);
      if (u == u0 || i == 0) {  // a new (chunk, q/k head): Q K^T
        const int slot = pairs & 1;
        FullBar::wait(&ss.qk_full[slot], (pairs >> 1) & 1);
        ++pairs;
        Tensor sQ = make_tensor(make_smem_ptr(ss.q[slot].data()), typename Cfg::LayRows{});
        Tensor sK = make_tensor(make_smem_ptr(ss.k[slot].data()), typename Cfg::LayRows{});
        wg_gemm(mma_qk, accS, thr_qk.partition_fragment_A(sQ), thr_qk.partition_fragment_B(sK));
      }
      const int qslot = (pairs - 1) & 1;
      const int64_t k = u - u0;
      const int s = static_cast<int>(k % S);
      FullBar::wait(&ss.full[s], (k / S) & 1);
      const int4 meta = ss.meta[s];
      const int len = meta.z;
      Tensor sV = make_tensor(make_smem_ptr(ss.v[s].data()), typename Cfg::LayV{});
      if (len < kChunk) {  // uniform
        for (int x = tidx; x < (kChunk - len) * 128; x += Cfg::kConsumers) sV(x % 128, len + x / 128) = E(0.f);
        cutlass::arch::fence_view_async_shared();
        gpu::named_barrier_sync(kOutBarWG, Cfg::kConsumers);
      }

      // O = Q h, issued now; P is built while it runs.
      Tensor sQ = make_tensor(make_smem_ptr(ss.q[qslot].data()), typename Cfg::LayRows{});
      Tensor sH = make_tensor(make_smem_ptr(ss.h[s].data()), typename Cfg::LayH{});
      Tensor tQa = thr_qh.partition_fragment_A(sQ);
      Tensor tHb = thr_qh.partition_fragment_B(sH);
      wg_issue(mma_qh, accO, tQa, tHb);

      // P (r, c) = (Q K^T)(r, c) exp(g_r - g_c) on and below the diagonal (selected, not scaled).
      const float* gs = ss.g[s];
      const float g_a = gs[acc_r0], g_b = gs[acc_r0 + 8];
      CUTE_UNROLL
      for (int e = 0; e < size(accS); ++e) {
        const int r = get<0>(cS(e)), c = get<1>(cS(e));
        tPa(e) = E(c <= r ? accS(e) * __expf(((e & 2) ? g_b : g_a) - gs[c]) : 0.f);
      }
      const float ex_a = __expf(g_a), ex_b = __expf(g_b);
      warpgroup_wait<0>();
      warpgroup_fence_operand(accO);
      CUTE_UNROLL
      for (int e = 0; e < size(accO); ++e) accO(e) *= (e & 2) ? ex_b : ex_a;  // rows r0 + 8 for e % 4 >= 2

      // O += P V_new.
      Tensor tVb = thr_pv.partition_fragment_B(sV);
      warpgroup_fence_operand(tPa);
      warpgroup_fence_operand(accO);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tPa); ++kb) gemm(mma_pv, tPa(_, _, kb), tVb(_, _, kb), accO);
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      warpgroup_fence_operand(accO);
      release(ss.empty[s]);
      if (i == G - 1 || u + 1 == u1) release(ss.qk_empty[qslot]);  // the pair's last use of Q

      E* const ob = p.o + int64_t{meta.y} * p.o_sb + int64_t{meta.x} * p.o_st + int64_t{meta.w} * p.o_sh;
      store_rows<128>(ob, p.o_st, len, acc_r0, acc_t, [&](int e) { return p.scale * accO(e); });
    }
  }
#endif
}

template <class E, int kStages>
Status launch_output_sm90(const OutputParams& op, const SeqLayout& L, int64_t max_chunks, int sms, cudaStream_t stream) {
  using Cfg = OutCfg<E, kStages>;
  const int rows = static_cast<int>(L.T);
  const int batches = L.varlen ? 1 : L.N;
  // TMA wants every global stride a multiple of 16 bytes, also for extents of 1 whose stride is
  // never used: those get an aligned stride of the tensor.
  auto fix = [](int64_t stride, int64_t extent, int64_t other) { return extent == 1 ? other : stride; };
  auto rows_t = [&](const Tok& t, int heads) {
    return make_tensor(make_gmem_ptr(static_cast<const E*>(t.p)), make_shape(rows, _128{}, heads, batches),
                       make_stride(t.st, _1{}, fix(t.sh, heads, t.st), fix(t.sb, batches, t.st)));
  };
  const Tok& vn = op.v_new;
  auto cols_t = make_tensor(make_gmem_ptr(static_cast<const E*>(vn.p)), make_shape(_128{}, rows, op.HV, batches),
                            make_stride(_1{}, vn.st, fix(vn.sh, op.HV, vn.st), fix(vn.sb, batches, vn.st)));
  const StateT& h = op.h;
  const int h_rows = static_cast<int>(h.rows);
  auto h_t = make_tensor(make_gmem_ptr(static_cast<const E*>(h.p)), make_shape(_128{}, _128{}, op.HV, h_rows),
                         make_stride(_1{}, h.sk, fix(h.sh, op.HV, h.sk), fix(h.s0, h_rows, h.sk)));
  const OutSm90Params<Cfg> p{make_tma_copy(SM90_TMA_LOAD{}, rows_t(op.q, op.H), typename Cfg::LayRows{}),
                             make_tma_copy(SM90_TMA_LOAD{}, rows_t(op.k, op.H), typename Cfg::LayRows{}),
                             make_tma_copy(SM90_TMA_LOAD{}, cols_t, typename Cfg::LayV{}),
                             make_tma_copy(SM90_TMA_LOAD{}, h_t, typename Cfg::LayH{}),
                             L,
                             op.g_cum,
                             static_cast<E*>(op.o.p),
                             op.o.sb,
                             op.o.st,
                             op.o.sh,
                             rows,
                             batches,
                             op.H,
                             op.HV,
                             op.HV / op.H,
                             h.rows,
                             op.scale};
  auto kernel = &output_sm90_kernel<Cfg>;
  constexpr int kSmem = static_cast<int>(sizeof(OutSmem90<Cfg>));
  static_assert(kSmem <= 227 * 1024, "shared memory exceeds the 227 KB a Hopper CTA can have");
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // One CTA per SM (its ring takes most of the shared memory), never more than there are stages.
  const int64_t stages = max_chunks * op.HV;
  const int grid = static_cast<int>(stages < sms ? stages : sms);
  kernel<<<grid, Cfg::kThreads, kSmem, stream>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn chunk output (sm90)");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda::sm90
