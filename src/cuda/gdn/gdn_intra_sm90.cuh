// Stages 1-3 of the whole forward on Hopper (sm_90a): the intra kernel of gdn_intra.cuh (gate
// cumsum, A = strict_lower(diag(beta)(K K^T (.) Gamma)), T = (I + A)^-1 in fp32, W, U and
// P = tril(Q K^T (.) Gamma)) with TMA tile loads and WGMMA products, and one CTA per (chunk, q/k
// head) instead of per (chunk, value head). Same outputs, layouts and precision as the mma.sync
// kernel, which other GPUs and the stage ops (gdn_kkt_inverse, gdn_wu) run.
//
// Why per q/k head: the stage moves ~88 KB per (chunk, value head) (K, V, Q in; W, U, P out) for
// ~6 MFLOP of tensor work, so it is bound by memory traffic and by how little of it overlaps the
// serial inverse. K K^T and Q K^T depend on the q/k head only: the CTA loads K and Q once, keeps
// both raw products in the accumulators of its two warpgroups, and walks the HV / H value heads
// sharing them, each applying its own gates and beta. That halves the K/Q tile traffic and the
// K K^T / Q K^T math at HV = 2 H, and the next value head's V tile streams in (TMA) while the
// current one is inverted.
//
// Two warpgroups (WG0: K K^T, then U = T diag(beta) V; WG1: Q K^T, then P and W =
// T diag(beta exp(g)) K); the fp32 inverse is gdn_intra.cuh's (all eight warps). The W/U products split
// the scaled fp32 T into hi + lo 16-bit halves (two WGMMA chains into one accumulator), as the
// mma.sync kernel does. Shared memory (~99 KB) lets two CTAs share an SM.
//
// Shared tiles: K (row, key) and V (row, value) as 128-byte-swizzled K-major 64 x 128 tiles, the
// TMA layout; the K-major A and B of K K^T / Q K^T read them as they are, and a 64-column half of
// either, read as (column, row), is exactly the MN-major 64 x 64 tile that T X needs as B.
// Rows past a chunk's len hold the next sequence's rows (or TMA's zeros past the tensor): K and V
// rows there are zeroed in shared memory (they meet zero coefficients of T, and 0 x NaN need not
// be 0); Q rows there only reach P rows that are not stored; P is selected, not scaled, to zero
// past len. A's rows there are beta 0 times K K^T rows of zeroed K, times the decays of the last
// valid row (gc repeats its cumsum): zero whenever the valid rows are finite.
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>

#include <cstdint>
#include <type_traits>

#include "attnkit/status.h"
#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_intra.cuh"
#include "cuda/gdn/gdn_state_output_sm90.cuh"

namespace attnkit::gdn_cuda::sm90 {

using namespace cute;

template <class E>
struct IntraCfg {
  static constexpr int kThreads = 256;
  // K, Q, V tiles (row, d), d contiguous: the TMA box and the K-major operands of X K^T.
  using LayRows = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, _128>{}));
  // Columns 64 h .. 64 h + 63 of a LayRows tile as (d, row): MN-major B of T X (same bytes).
  using LayHalfMN = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<E>{}, Shape<_64, _64>{}));
  // hi / lo halves of the scaled T (i, k): K-major A of T X.
  using LayT = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, _64>{}));
  using MmaXK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, _64, _128>, GMMA::Major::K, GMMA::Major::K>()));
  using MmaTX = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, _64, _64>, GMMA::Major::K, GMMA::Major::MN>()));
  // Global q/k/v as TMA sees them: (rows, 128, heads, batch), d contiguous.
  using GRows = decltype(make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)),
                                     Shape<int32_t, _128, int32_t, int32_t>{},
                                     Stride<int64_t, _1, int64_t, int64_t>{}));
  using Tma = decltype(make_tma_copy(SM90_TMA_LOAD{}, GRows{}, LayRows{}));
  static constexpr uint32_t kTileBytes = 64 * 128 * sizeof(E);
};

template <class E>
struct IntraSmem90 {
  cute::array_aligned<E, 64 * 128, 1024> k;
  // V tiles, value head j in xv[j % 2]; xv[1] first holds Q (free once Q K^T is done).
  cute::array_aligned<E, 64 * 128, 1024> xv[2];
  // A (fp32) is dead once T is built: U's hi/lo halves of the scaled T reuse its bytes.
  union alignas(1024) {
    float am[kChunk * kLdA];
    struct {
      cute::array_aligned<E, 64 * 64, 1024> hi, lo;
    } tu;
  } u;
  cute::array_aligned<E, 64 * 64, 1024> tw_hi, tw_lo;
  alignas(16) float tm[kChunk * kLdI];
  float gc[kChunk], bt[kChunk], cw[kChunk];
  int len;  // the chunk's row count, read afresh in the value-head loop (see fresh_tid)
  alignas(8) uint64_t bar_kq;
  alignas(8) uint64_t bar_v[2];
};

template <class E>
struct IntraSm90Params {
  typename IntraCfg<E>::Tma tma_k, tma_q, tma_v;
  IntraParams ip;  // gates, beta and the outputs (pointers, strides), H, HV
  SeqLayout L;
  int rows, batches, group;
};

// Rows len..63 of a 64 x 128 shared tile to zero (generic-proxy stores; the caller fences and
// syncs before the tile feeds a WGMMA).
template <class E, class Tile>
CUTE_DEVICE void zero_rows_past(Tile& t, int len) {
  for (int x = threadIdx.x; x < (kChunk - len) * 128; x += IntraCfg<E>::kThreads) t(len + x / 128, x % 128) = E(0.f);
}

// The thread's index, read afresh (volatile: never merged with an earlier read). The value-head
// loop's registers are full: values derived from the thread index or the chunk (the accumulator
// row and column, len) held across it were spilled, and their reloads missed L1 (2 x 99 KB of
// shared memory leave it little): ~6% of the intra kernel's stall samples on H100. Derived afresh
// from this and from shared memory, they cost a few integer instructions instead.
CUTE_DEVICE int fresh_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}
CUTE_DEVICE int fresh_len(const int& len) { return *static_cast<const volatile int*>(&len); }

// The CUDA 16-bit type of a CUTLASS one (gdn_device.cuh's helpers take the former).
template <class E>
using NativeOf = std::conditional_t<std::is_same_v<E, cutlass::bfloat16_t>, __nv_bfloat16, __half>;

// A warpgroup's m64 x kCols accumulator tile, element i's value val(i), to the 16-bit rows of dst
// (row 0, column 0; rows < len; rows 16-byte aligned): the thread's rows r0 and r0 + 8 leave
// as whole 16-byte pieces through store_acc_rows16's quad transpose (the accumulator of a warp
// is laid out as mma.sync's m16n8 C fragments: element e + 4 b is e of n-tile b).
template <int kCols, class E, class F>
CUTE_DEVICE void store_rows(E* dst, int64_t st, int len, int r0, int t, F&& val) {
  static_assert(kCols % 32 == 0);
  using N = NativeOf<E>;
  CUTE_UNROLL
  for (int grp = 0; grp < kCols / 32; ++grp) {
    float v[4][4];
    CUTE_UNROLL
    for (int j = 0; j < 4; ++j) {
      CUTE_UNROLL
      for (int e = 0; e < 4; ++e) v[j][e] = val(16 * grp + 4 * j + e);
    }
    N* const b = reinterpret_cast<N*>(dst) + 32 * grp;
    store_acc_rows16<N>(b + r0 * st, b + (r0 + 8) * st, v, r0 < len, r0 + 8 < len, t);
  }
}
template <class E, class F>
CUTE_DEVICE void store_rows64(E* dst, int64_t st, int len, int r0, int t, F&& val) {
  store_rows<64>(dst, st, len, r0, t, static_cast<F&&>(val));
}

// acc = A B (this warpgroup's m64n64 tile; A, B partitioned smem fragments, k-blocks in mode 2).
template <class Mma, class Acc, class A, class B>
CUTE_DEVICE void wg_gemm(Mma& mma, Acc& acc, const A& a, const B& b) {
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(a); ++kb) {
    gemm(mma, a(_, _, kb), b(_, _, kb), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
}
// acc = (A_hi + A_lo) B as two chains into one accumulator (A_hi + A_lo: a fp32 matrix to ~16 bits).
template <class Mma, class Acc, class A0, class A1, class B>
CUTE_DEVICE void wg_gemm_hilo(Mma& mma, Acc& acc, const A0& ahi, const A1& alo, const B& b) {
  warpgroup_fence_operand(acc);
  warpgroup_arrive();
  mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(ahi); ++kb) {
    gemm(mma, ahi(_, _, kb), b(_, _, kb), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(alo); ++kb) gemm(mma, alo(_, _, kb), b(_, _, kb), acc);
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
}

template <class E>
__global__ void __launch_bounds__(IntraCfg<E>::kThreads, 2) intra_sm90_kernel(const __grid_constant__ IntraSm90Params<E> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = IntraCfg<E>;
  using Bar = cutlass::arch::ClusterTransactionBarrier;
  using LayRows = typename Cfg::LayRows;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<IntraSmem90<E>*>(smem_raw);
  ChunkPos c;
  if (!locate_chunk(p.L, blockIdx.x, &c)) return;  // uniform: before any barrier or TMA
  const int hq = blockIdx.y;
  const int tid = threadIdx.x, wg = tid / 128, tidx = tid % 128;
  const int len = c.len;
  const int row0 = static_cast<int>(c.row0), batch = static_cast<int>(c.batch);
  const IntraParams& ip = p.ip;

  auto load = [&](const typename Cfg::Tma& tma, int heads, int head, E* dst, uint64_t& bar) {
    Tensor m = tma.get_tma_tensor(make_shape(p.rows, _128{}, heads, p.batches));
    Tensor g = local_tile(domain_offset(make_coord(row0, _0{}), m(_, _, head, batch)), Shape<_64, _128>{},
                          make_coord(_0{}, _0{}));
    auto t = tma.get_slice(0);
    copy(tma.with(bar), t.partition_S(g), t.partition_D(make_tensor(make_smem_ptr(dst), LayRows{})));
  };
  if (tid == 0) {
    ss.len = len;
    Bar::init(&ss.bar_kq, 1);
    Bar::init(&ss.bar_v[0], 1);
    Bar::init(&ss.bar_v[1], 1);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    Bar::arrive_and_expect_tx(&ss.bar_kq, 2 * Cfg::kTileBytes);
    load(p.tma_k, ip.H, hq, ss.k.data(), ss.bar_kq);
    load(p.tma_q, ip.H, hq, ss.xv[1].data(), ss.bar_kq);
    Bar::arrive_and_expect_tx(&ss.bar_v[0], Cfg::kTileBytes);
    load(p.tma_v, ip.HV, hq * p.group, ss.xv[0].data(), ss.bar_v[0]);
  }
  // The first value head's gates while K and Q stream in (barriers follow before any use).
  intra_gates(ip, c, hq * p.group, ss.gc, ss.bt);
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), LayRows{});
  Tensor sQ = make_tensor(make_smem_ptr(ss.xv[1].data()), LayRows{});
  Bar::wait(&ss.bar_kq, 0);
  if (len < kChunk) {
    zero_rows_past<E>(sK, len);
    cutlass::arch::fence_view_async_shared();
    __syncthreads();
  }

  // The raw products, kept in registers across the value heads: WG0 K K^T, WG1 Q K^T.
  typename Cfg::MmaXK mma_xk;
  auto thr_xk = mma_xk.get_thread_slice(tidx);
  Tensor accX = partition_fragment_C(mma_xk, Shape<_64, _64>{});
  check_acc_layout(accX);
  static_assert(decltype(size(accX))::value == 32);
  wg_gemm(mma_xk, accX, thr_xk.partition_fragment_A(wg == 0 ? sK : sQ), thr_xk.partition_fragment_B(sK));
  __syncthreads();  // Q's tile is free for the second value head's V

  typename Cfg::MmaTX mma_tx;
  auto thr_tx = mma_tx.get_thread_slice(tidx);
  Tensor accY = partition_fragment_C(mma_tx, Shape<_64, _64>{});
  check_acc_layout(accY);
  // WG0: U = T diag(beta) V; WG1: W = T diag(beta exp(g)) K.
  E* const t_hi = wg == 0 ? ss.u.tu.hi.data() : ss.tw_hi.data();
  E* const t_lo = wg == 0 ? ss.u.tu.lo.data() : ss.tw_lo.data();
  Tensor tAh = thr_tx.partition_fragment_A(make_tensor(make_smem_ptr(t_hi), typename Cfg::LayT{}));
  Tensor tAl = thr_tx.partition_fragment_A(make_tensor(make_smem_ptr(t_lo), typename Cfg::LayT{}));

  for (int j = 0; j < p.group; ++j) {
    const int hv = hq * p.group + j;
    const int slot = j & 1;
    // The thread's index, warpgroup, the chunk's len and the thread's accumulator coordinates,
    // read afresh here and after each of the loop's long phases (see fresh_tid). acc_r0: the first
    // accumulator row; acc_t: the column pair within each 8-column block (the same in every
    // m64n64 accumulator of the warpgroup).
    int tid, wg, len;
    auto refresh = [&] { tid = fresh_tid(), wg = tid / 128, len = fresh_len(ss.len); };
    refresh();
    auto cX = mma_xk.get_thread_slice(tid % 128).partition_C(make_identity_tensor(Shape<_64, _64>{}));
    int acc_r0 = get<0>(cX(0)), acc_t = get<1>(cX(0)) / 2;
    if (tid == 0 && j + 1 < p.group) {  // the next value head's V, into the slot freed last
      Bar::arrive_and_expect_tx(&ss.bar_v[slot ^ 1], Cfg::kTileBytes);
      load(p.tma_v, ip.HV, hv + 1, ss.xv[slot ^ 1].data(), ss.bar_v[slot ^ 1]);
    }
    // The next value head's gates: loads issued now, used (scanned and stored) once this head's
    // last reads of gc / bt / cw are behind a barrier, so their latency hides behind the work.
    GateRegs next_gates;
    if (j + 1 < p.group) next_gates = intra_gates_load(ip, c, hv + 1, tid);
    if (tid < kChunk) ss.cw[tid] = ss.bt[tid] * __expf(ss.gc[tid]);  // read after later barriers
    // The gates of the thread's 2 rows and 16 columns, in registers: read per element, each would
    // be loaded again after every store to A (the compiler cannot tell A from the gates).
    // Element i of the accumulator is row acc_r0 + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 acc_t + (i & 1).
    float g_row[2], g_col[16];
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) g_row[h] = ss.gc[acc_r0 + 8 * h];
    CUTE_UNROLL
    for (int x = 0; x < 16; ++x) g_col[x] = ss.gc[8 * (x >> 1) + 2 * acc_t + (x & 1)];
    if (wg == 0) {
      // A (r, k) = beta_r (K K^T)(r, k) exp(g_r - g_k) below the diagonal, rows < len; column
      // pairs as 8-byte stores.
      const float b_row[2] = {ss.bt[acc_r0], ss.bt[acc_r0 + 8]};
      CUTE_UNROLL
      for (int i = 0; i < size(accX); i += 2) {
        const int r = get<0>(cX(i)), k = get<1>(cX(i));
        const float b = r < len ? b_row[(i >> 1) & 1] : 0.f;
        *reinterpret_cast<float2*>(&ss.u.am[r * kLdA + k]) = make_float2(
            r > k ? b * accX(i) * __expf(g_row[(i >> 1) & 1] - g_col[2 * (i >> 2)]) : 0.f,
            r > k + 1 ? b * accX(i + 1) * __expf(g_row[(i >> 1) & 1] - g_col[2 * (i >> 2) + 1]) : 0.f);
      }
    } else {
      // P (i, j) = (Q K^T)(i, j) exp(g_i - g_j) on and below the diagonal, rows < len.
      const Tok& o = ip.p_out;
      E* const pb = static_cast<E*>(o.p) + c.batch * o.sb + c.row0 * o.st + int64_t{hv} * o.sh;
      store_rows64(pb, o.st, len, acc_r0, acc_t, [&](int i) {
        const int r = get<0>(cX(i)), k = get<1>(cX(i));
        return k <= r ? accX(i) * __expf(g_row[(i >> 1) & 1] - g_col[2 * (i >> 2) + (i & 1)]) : 0.f;
      });
    }
    __syncthreads();
    invert_unit_lower(ss.u.am, ss.tm);  // ends with a barrier

    Bar::wait(&ss.bar_v[slot], (j >> 1) & 1);
    refresh();
    Tensor sV = make_tensor(make_smem_ptr(ss.xv[slot].data()), LayRows{});
    if (len < kChunk) zero_rows_past<E>(sV, len);
    {
      // Thread: row r, columns c0 .. c0 + 15 of the scaled T (lower triangle; the upper blocks
      // of tm hold the inverse's scratch), as 16-byte pieces of its hi and lo halves.
      const int r = tid >> 2, c0 = 16 * (tid & 3);
      Tensor uh = make_tensor(make_smem_ptr(ss.u.tu.hi.data()), typename Cfg::LayT{});
      Tensor ul = make_tensor(make_smem_ptr(ss.u.tu.lo.data()), typename Cfg::LayT{});
      Tensor wh = make_tensor(make_smem_ptr(ss.tw_hi.data()), typename Cfg::LayT{});
      Tensor wl = make_tensor(make_smem_ptr(ss.tw_lo.data()), typename Cfg::LayT{});
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int cc = c0 + 8 * h;
        float x[8];
        const float4 a = *reinterpret_cast<const float4*>(&ss.tm[r * kLdI + cc]);
        const float4 b = *reinterpret_cast<const float4*>(&ss.tm[r * kLdI + cc + 4]);
        x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
        uint32_t uhi[4], ulo[4], whi[4], wlo[4];
        CUTE_UNROLL
        for (int e = 0; e < 8; e += 2) {
          const float t0 = cc + e <= r ? x[e] : 0.f, t1 = cc + e + 1 <= r ? x[e + 1] : 0.f;
          split_pair<E>(t0 * ss.bt[cc + e], t1 * ss.bt[cc + e + 1], &uhi[e / 2], &ulo[e / 2]);
          split_pair<E>(t0 * ss.cw[cc + e], t1 * ss.cw[cc + e + 1], &whi[e / 2], &wlo[e / 2]);
        }
        // 8 columns from a multiple of 8 stay one 16-byte piece under the 128-byte swizzle.
        *reinterpret_cast<uint4*>(&uh(r, cc)) = make_uint4(uhi[0], uhi[1], uhi[2], uhi[3]);
        *reinterpret_cast<uint4*>(&ul(r, cc)) = make_uint4(ulo[0], ulo[1], ulo[2], ulo[3]);
        *reinterpret_cast<uint4*>(&wh(r, cc)) = make_uint4(whi[0], whi[1], whi[2], whi[3]);
        *reinterpret_cast<uint4*>(&wl(r, cc)) = make_uint4(wlo[0], wlo[1], wlo[2], wlo[3]);
      }
    }
    cutlass::arch::fence_view_async_shared();
    __syncthreads();

    // Two 64-column halves (one accumulator live beside the raw product), each stored from
    // registers, rows < len.
    refresh();
    acc_r0 = get<0>(cX(0)), acc_t = get<1>(cX(0)) / 2;
    E* const x_base = wg == 0 ? ss.xv[slot].data() : ss.k.data();
    const Tok& dst = wg == 0 ? ip.u : ip.w;
    E* const ob = static_cast<E*>(dst.p) + c.batch * dst.sb + c.row0 * dst.st + int64_t{hv} * dst.sh;
    CUTE_UNROLL
    for (int nh = 0; nh < 2; ++nh) {
      Tensor sB = make_tensor(make_smem_ptr(x_base + nh * 64 * 64), typename Cfg::LayHalfMN{});
      wg_gemm_hilo(mma_tx, accY, tAh, tAl, thr_tx.partition_fragment_B(sB));
      store_rows64(ob + 64 * nh, dst.st, len, acc_r0, acc_t, [&](int i) { return accY(i); });
    }
    if (j + 1 < p.group) intra_gates_store(ip, c, hv + 1, tid, next_gates, ss.gc, ss.bt);
    __syncthreads();  // the next gates are stored; T's halves, A / T and this V slot are free
  }
#endif
}

template <class E>
Status launch_intra_sm90(const IntraParams& ip, const SeqLayout& L, int64_t max_chunks, cudaStream_t stream) {
  using Cfg = IntraCfg<E>;
  const int rows = static_cast<int>(L.T);
  const int batches = L.varlen ? 1 : L.N;
  // TMA wants every global stride a multiple of 16 bytes, also for extents of 1 whose stride is
  // never used: those get the (aligned) row stride.
  auto fix = [](int64_t stride, int extent, int64_t row) { return extent == 1 ? row : stride; };
  auto rows_t = [&](const Tok& t, int heads) {
    return make_tensor(make_gmem_ptr(static_cast<const E*>(t.p)), make_shape(rows, _128{}, heads, batches),
                       make_stride(t.st, _1{}, fix(t.sh, heads, t.st), fix(t.sb, batches, t.st)));
  };
  const IntraSm90Params<E> p{make_tma_copy(SM90_TMA_LOAD{}, rows_t(ip.k, ip.H), typename Cfg::LayRows{}),
                             make_tma_copy(SM90_TMA_LOAD{}, rows_t(ip.q, ip.H), typename Cfg::LayRows{}),
                             make_tma_copy(SM90_TMA_LOAD{}, rows_t(ip.v, ip.HV), typename Cfg::LayRows{}),
                             ip,
                             L,
                             rows,
                             batches,
                             ip.HV / ip.H};
  auto kernel = &intra_sm90_kernel<E>;
  constexpr int kSmem = static_cast<int>(sizeof(IntraSmem90<E>));
  static_assert(kSmem <= 113 * 1024, "two CTAs per SM must fit");
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(max_chunks), static_cast<unsigned>(ip.H));
  kernel<<<grid, Cfg::kThreads, kSmem, stream>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn intra (sm90)");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda::sm90
