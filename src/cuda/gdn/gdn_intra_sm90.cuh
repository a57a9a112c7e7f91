// Stages 1-3 of the whole forward on Hopper (sm_90a): gate cumsum, A = strict_lower(diag(beta)
// (K K^T (.) Gamma)), T = (I + A)^-1 in fp32 and P = tril(Q K^T (.) Gamma), with TMA tile loads and
// WGMMA products, one CTA per (chunk, q/k head). Instead of W and U it writes C = T diag(beta) in
// 16 bits (zeros above the diagonal), from which the fused state/output kernel
// (gdn_state_output_sm90.cuh) computes v_new = C (V - diag(exp(g)) K S). C is 128 bytes per (row,
// value head), W and U were 512, and this kernel reads no V, so it moves a fraction of their
// bytes. (Nor does it write C diag(exp(g)): the state/output kernel does not need it.)
// Precision: C is rounded to 16 bits once, where W and U used to be built from hi + lo halves of
// the fp32 T. o's relative L2 against the fp32 reference stayed 2.91e-3 at T = 16k and on 8 uneven
// sequences (bench/gdn_accuracy.py; fla 3.33e-3), the final state's 1.67e-3 / 1.66e-3.
// The mma.sync intra kernel (gdn_intra.cuh) writes the same C where asked (t_out), so either feeds
// the sm90 state/output kernel.
//
// Why per q/k head: K K^T and Q K^T depend on the q/k head only: the CTA loads K and Q once, keeps
// both raw products in the accumulators of its two warpgroups (WG0: K K^T, WG1: Q K^T), and walks
// the HV / H value heads sharing them, each applying its own gates and beta. Per value head, WG0
// builds A and inverts it (gdn_invert_tc.cuh: fp32 diagonal blocks, the block products on
// tensor cores in 3xTF32) while WG1 builds and stores P; then all eight warps store C. Shared
// memory (~70 KB) and 80 registers a thread let three CTAs share an SM.
// The kernel had been bound by shared-memory wavefronts (the FFMA inverse's operand loads most of
// them, 2-way conflicts on C's reads of T) and by its element-wise epilogues; hence the
// tensor-core inverse, C's reads without conflicts, the epilogues by 16-column block (none above
// the diagonal, no masks below it) and the inverse on one warpgroup beside P, with o's and the
// final state's errors unchanged. Four CTAs an SM, a persistent grid and value heads in pairs
// measured slower (docs/decisions.md).
//
// Rows past a chunk's len hold the next sequence's rows (or TMA's zeros past the tensor): K rows
// there are zeroed in shared memory (0 x NaN need not be 0); Q rows there only reach P rows that
// are not stored; P is selected, not scaled, to zero past len. A's rows there are beta 0 times
// K K^T rows of zeroed K, times the decays of the last valid row (gc repeats its cumsum): zero
// whenever the valid rows are finite. Only rows < len of C and P are stored.
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
#include "cuda/gdn/gdn_invert_tc.cuh"
#include "cuda/gdn/gdn_state_output_sm90.cuh"

namespace attnkit::gdn_cuda::sm90 {

using namespace cute;

template <class E>
struct IntraCfg {
  static constexpr int kThreads = 256;
  // K, Q tiles (row, d), d contiguous: the TMA box and the K-major operands of X K^T.
  using LayRows = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, _128>{}));
  using MmaXK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<E, E, float, Shape<_64, _64, _128>, GMMA::Major::K, GMMA::Major::K>()));
  // Global q/k as TMA sees them: (rows, 128, heads, batch), d contiguous.
  using GRows = decltype(make_tensor(make_gmem_ptr(static_cast<E const*>(nullptr)),
                                     Shape<int32_t, _128, int32_t, int32_t>{},
                                     Stride<int64_t, _1, int64_t, int64_t>{}));
  using Tma = decltype(make_tma_copy(SM90_TMA_LOAD{}, GRows{}, LayRows{}));
  static constexpr uint32_t kTileBytes = 64 * 128 * sizeof(E);
};

// Row strides of A and T in shared memory: A's (8 mod 32) makes the accumulator's 8-byte stores and
// the inverse's 8-byte A-operand loads conflict-free; T's, gdn_intra.cuh's kLdI (4 mod 32), its
// B-operand loads and the 16-byte row reads of T's store (invert_unit_lower_tc, the C epilogue).
constexpr int kLdA90 = kChunk + 8;
constexpr int kBarInverse = 1;  // named barrier of the warpgroup that inverts (0 is __syncthreads)

template <class E>
struct IntraSmem90 {
  cute::array_aligned<E, 64 * 128, 1024> k, q;
  alignas(16) float am[kChunk * kLdA90];  // A (fp32)
  alignas(16) float tm[kChunk * kLdI];
  float gc[kChunk], bt[kChunk];
  alignas(16) float cw[kChunk];  // beta: T's column scale
  int len;  // the chunk's row count, read afresh in the value-head loop (see fresh_tid)
  alignas(8) uint64_t bar_kq;
};

template <class E>
struct IntraSm90Params {
  typename IntraCfg<E>::Tma tma_k, tma_q;
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
// shared memory leave it little), a visible share of the kernel's stalls. Derived afresh
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
  wg_issue(mma, acc, a, b);
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
}
template <class E>
__global__ void __launch_bounds__(IntraCfg<E>::kThreads, 3) intra_sm90_kernel(const __grid_constant__ IntraSm90Params<E> p) {
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

  auto load = [&](const typename Cfg::Tma& tma, int head, E* dst, uint64_t& bar) {
    Tensor m = tma.get_tma_tensor(make_shape(p.rows, _128{}, ip.H, p.batches));
    Tensor g = local_tile(domain_offset(make_coord(row0, _0{}), m(_, _, head, batch)), Shape<_64, _128>{},
                          make_coord(_0{}, _0{}));
    auto t = tma.get_slice(0);
    copy(tma.with(bar), t.partition_S(g), t.partition_D(make_tensor(make_smem_ptr(dst), LayRows{})));
  };
  // K and Q are requested by the thread that initialises their barrier, before the block syncs,
  // so their loads overlap the block's set-up (measured slightly faster).
  if (tid == 0) {
    ss.len = len;
    Bar::init(&ss.bar_kq, 1);
    cutlass::arch::fence_barrier_init();
    Bar::arrive_and_expect_tx(&ss.bar_kq, 2 * Cfg::kTileBytes);
    load(p.tma_k, hq, ss.k.data(), ss.bar_kq);
    load(p.tma_q, hq, ss.q.data(), ss.bar_kq);
  }
  __syncthreads();  // the barrier's initialisation and len, for every thread
  // The first value head's gates while K and Q stream in (barriers follow before any use).
  intra_gates(ip, c, hq * p.group, ss.gc, ss.bt);
  Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), LayRows{});
  Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), LayRows{});
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
  __syncthreads();  // the first head's gates (stored by warps 0-2) are read by every thread below

  for (int j = 0; j < p.group; ++j) {
    const int hv = hq * p.group + j;
    // The thread's index, warpgroup, the chunk's len and the thread's accumulator coordinates,
    // read afresh here (see fresh_tid). acc_r0: the first accumulator row; acc_t: the column pair
    // within each 8-column block (the same in every m64n64 accumulator of the warpgroup).
    const int tid = fresh_tid(), wg = tid / 128, len = fresh_len(ss.len);
    auto cX = mma_xk.get_thread_slice(tid % 128).partition_C(make_identity_tensor(Shape<_64, _64>{}));
    const int acc_r0 = get<0>(cX(0)), acc_t = get<1>(cX(0)) / 2;
    // The next value head's gates: loads issued now, used (scanned and stored) once this head's
    // last reads of gc / bt are behind a barrier, so their latency hides behind the work.
    GateRegs next_gates;
    if (j + 1 < p.group) next_gates = intra_gates_load(ip, c, hv + 1, tid);
    if (tid < kChunk) ss.cw[tid] = ss.bt[tid];  // T's column scale (bt takes the next head's while T leaves)
    // The gates of the thread's 2 rows and 16 columns, in registers, times log2(e) (the exponentials
    // are exp2 of differences): read per element, each would be loaded again after every store to A
    // (the compiler cannot tell A from the gates).
    // Element i of the accumulator is row acc_r0 + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 acc_t + (i & 1):
    // column block (i >> 3) of 16, against the warp's row block acc_r0 >> 4.
    constexpr float kLog2e = 1.4426950408889634f;
    float g_row[2], g_col[16];
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) g_row[h] = kLog2e * ss.gc[acc_r0 + 8 * h];
    CUTE_UNROLL
    for (int x = 0; x < 16; ++x) g_col[x] = kLog2e * ss.gc[8 * (x >> 1) + 2 * acc_t + (x & 1)];
    auto decayed = [&](int i) { return accX(i) * exp2f(g_row[(i >> 1) & 1] - g_col[2 * (i >> 2) + (i & 1)]); };
    const int wrow = (tid >> 5) & 3;  // the warp's row block (warp-uniform: the branches below are)
    if (wg == 0) {
      // A (r, k) = beta_r (K K^T)(r, k) exp(g_r - g_k) below the diagonal (beta is 0 on rows past
      // len), as 8-byte column pairs. Only the column blocks up to the warp's diagonal one: the
      // inverse reads A's strictly lower entries alone, so the diagonal block's others go unmasked.
      const float b_row[2] = {ss.bt[acc_r0], ss.bt[acc_r0 + 8]};
      CUTE_UNROLL
      for (int i = 0; i < size(accX); i += 2) {
        if ((i >> 3) > wrow) continue;
        const int r = get<0>(cX(i)), k = get<1>(cX(i));
        const float b = b_row[(i >> 1) & 1];
        *reinterpret_cast<float2*>(&ss.am[r * kLdA90 + k]) = make_float2(b * decayed(i), b * decayed(i + 1));
      }
      invert_unit_lower_tc<kLdA90, kLdI>(ss.am, ss.tm, kBarInverse);
    } else {
      // P (i, j) = (Q K^T)(i, j) exp(g_i - g_j) on and below the diagonal, rows < len (selected in
      // the diagonal block: its upper exponentials may overflow), while WG0 inverts.
      float v[32];
      CUTE_UNROLL
      for (int cb = 0; cb < 4; ++cb) {  // the thread's 8 elements of each 16-column block
        if (cb < wrow) {
          CUTE_UNROLL
          for (int i = 8 * cb; i < 8 * cb + 8; ++i) v[i] = decayed(i);
        } else if (cb == wrow) {
          CUTE_UNROLL
          for (int i = 8 * cb; i < 8 * cb + 8; ++i) v[i] = get<1>(cX(i)) <= get<0>(cX(i)) ? decayed(i) : 0.f;
        } else {
          CUTE_UNROLL
          for (int i = 8 * cb; i < 8 * cb + 8; ++i) v[i] = 0.f;
        }
      }
      const Tok& o = ip.p_out;
      E* const pb = static_cast<E*>(o.p) + c.batch * o.sb + c.row0 * o.st + int64_t{hv} * o.sh;
      store_rows64(pb, o.st, len, acc_r0, acc_t, [&](int i) { return v[i]; });
    }
    __syncthreads();  // T is complete

    {
      // C = T diag(beta) in 16 bits, rows < len, zeros above the diagonal (tm's upper blocks hold
      // scratch): thread row r, columns c0 .. c0 + 7 and c0 + 32 .. c0 + 39, as 16-byte stores.
      // Columns 8 apart across a row's 4 threads keep each quarter warp's 16-byte reads of T on
      // distinct banks (16 apart, they met 2-way conflicts).
      const int r = fresh_tid() >> 2, c0 = 8 * (fresh_tid() & 3);
      const Tok& o = ip.t_out;
      if (r < fresh_len(ss.len)) {
        E* const dst = static_cast<E*>(o.p) + c.batch * o.sb + (c.row0 + r) * o.st + int64_t{hv} * o.sh;
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int cc = c0 + 32 * h;
          float t[8], cw[8];
          CUTE_UNROLL
          for (int q = 0; q < 2; ++q) {
            const float4 x = *reinterpret_cast<const float4*>(&ss.tm[r * kLdI + cc + 4 * q]);
            const float4 u = *reinterpret_cast<const float4*>(&ss.cw[cc + 4 * q]);
            t[4 * q] = x.x, t[4 * q + 1] = x.y, t[4 * q + 2] = x.z, t[4 * q + 3] = x.w;
            cw[4 * q] = u.x, cw[4 * q + 1] = u.y, cw[4 * q + 2] = u.z, cw[4 * q + 3] = u.w;
          }
          uint32_t tu[4];
          CUTE_UNROLL
          for (int e = 0; e < 8; e += 2) {
            const float t0 = cc + e <= r ? t[e] * cw[e] : 0.f;
            const float t1 = cc + e + 1 <= r ? t[e + 1] * cw[e + 1] : 0.f;
            tu[e / 2] = pack2f<E>(t0, t1);
          }
          *reinterpret_cast<uint4*>(dst + cc) = make_uint4(tu[0], tu[1], tu[2], tu[3]);
        }
      }
    }
    if (j + 1 < p.group) intra_gates_store(ip, c, hv + 1, fresh_tid(), next_gates, ss.gc, ss.bt);
    __syncthreads();  // the next gates are stored; A, T and cw are free
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
                             ip,
                             L,
                             rows,
                             batches,
                             ip.HV / ip.H};
  auto kernel = &intra_sm90_kernel<E>;
  constexpr int kSmem = static_cast<int>(sizeof(IntraSmem90<E>));
  static_assert(kSmem <= 74 * 1024, "three CTAs per SM must fit");
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(max_chunks), static_cast<unsigned>(ip.H));
  kernel<<<grid, Cfg::kThreads, kSmem, stream>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn intra (sm90)");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda::sm90
