// Host-side checks of the sm90 Gated DeltaNet state/output kernel's shared-memory address
// arithmetic, against CuTe's own layouts (no GPU needed, so CI runs them), for both widths (32 and
// 64 value columns per CTA). The kernel stores its S_hi pairs and its ṽ / v_new pairs at N / 8
// per-thread base addresses each (pair 0's address XOR 16 b, so_base) plus compile-time
// immediates (so_s_hi_base / so_s_hi_imm, so_vt_imm), reads V's pairs at the latter, and reads the
// Kᵀ tile as K; a change of the layouts or of the state warpgroup's MMAs that broke those
// decompositions would read or store at wrong addresses.
#include <gtest/gtest.h>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include <cstdint>
#include <vector>

#include "cuda/gdn/gdn_state_output_sm90.cuh"

namespace {

using namespace cute;
namespace sm90 = attnkit::gdn_cuda::sm90;

// Byte offset, in a 1024-byte aligned tile of the kernel's 16-bit layout Lay indexed (column,
// row), of the accumulator pair whose first element is i (its (row, column) in the thread's
// coordinates c; the pair's second element must be the next column). The offset is taken through
// a shared-memory pointer, as the kernel indexes the tile (the swizzle acts on the address;
// evaluated on its own, the composed layout applies it in other units).
template <class E, class Lay, int kElems, class Coords>
int pair_offset(const Coords& c, int i) {
  alignas(1024) static E tile[kElems];
  Tensor t = make_tensor(make_smem_ptr(tile), Lay{});
  const int row = get<0>(c(i)), col = get<1>(c(i));
  EXPECT_EQ(get<0>(c(i + 1)), row);
  EXPECT_EQ(get<1>(c(i + 1)), col + 1);
  return static_cast<int>(reinterpret_cast<const char*>(raw_pointer_cast(&t(col, row))) -
                          reinterpret_cast<const char*>(tile));
}

// The S pair q of thread t in S_hi (LayS, values x keys) of the variant with N value columns.
template <class E, int N>
int s_hi_pair_offset(int t, int q) {
  using Cfg = sm90::SoCfg<E, 2, N>;
  typename Cfg::MmaKeys mma;
  Tensor cS = mma.get_thread_slice(t).partition_C(make_identity_tensor(Shape<_128, Int<N>>{}));
  EXPECT_LT(get<1>(cS(sm90::so_pair_elem<N>(q))) + 1, N) << "pair " << q << " must be two of the N columns";
  return pair_offset<E, typename Cfg::LayS, N * 128>(cS, sm90::so_pair_elem<N>(q));
}

template <class E, int N>
void check_s_hi_pairs() {
  for (int t = 0; t < 128; ++t) {
    const uint32_t pair0 = static_cast<uint32_t>(s_hi_pair_offset<E, N>(t, 0));
    for (int b = 0; b < N / 8; ++b) {
      const int at = s_hi_pair_offset<E, N>(t, 2 * b);
      ASSERT_EQ(at, static_cast<int>(sm90::so_base(pair0, b))) << "thread " << t << ", base " << b;
    }
    for (int q = 0; q < N / 2; ++q) {
      const int base = s_hi_pair_offset<E, N>(t, 2 * sm90::so_s_hi_base<N>(q));
      const int at = s_hi_pair_offset<E, N>(t, q);
      ASSERT_EQ(at, base + static_cast<int>(sm90::so_s_hi_imm<N>(q))) << "thread " << t << ", pair " << q;
    }
  }
}

// The VN pair q (elements 2 q, 2 q + 1 of the state warpgroup's 64 x N VN accumulator) of
// thread t in ṽ (LayVt, values x rows).
template <class E, int N>
int vt_pair_offset(int t, int q) {
  using Cfg = sm90::SoCfg<E, 2, N>;
  typename Cfg::MmaRowsC mma;
  Tensor cVN = mma.get_thread_slice(t).partition_C(make_identity_tensor(Shape<_64, Int<N>>{}));
  return pair_offset<E, typename Cfg::LayVt, N * 64>(cVN, 2 * q);
}

template <class E, int N>
void check_vt_pairs() {
  for (int t = 0; t < 128; ++t) {
    const uint32_t pair0 = static_cast<uint32_t>(vt_pair_offset<E, N>(t, 0));
    for (int b = 0; b < N / 8; ++b) {
      const int at = vt_pair_offset<E, N>(t, 2 * b);
      ASSERT_EQ(at, static_cast<int>(sm90::so_base(pair0, b))) << "thread " << t << ", base " << b;
    }
    for (int q = 0; q < N / 4; ++q) {
      const int base = vt_pair_offset<E, N>(t, q & ~1);
      const int at = vt_pair_offset<E, N>(t, q);
      ASSERT_EQ(at, base + static_cast<int>(sm90::so_vt_imm<N>(q))) << "thread " << t << ", pair " << q;
    }
  }
}

// X = K S_hi reads the Kᵀ tile as K: element (row r, key k) of LayRowsD must be element (k, r) of
// LayKt, through a shared-memory pointer as the kernel indexes them.
template <class E>
void check_kt_is_k() {
  using Cfg = sm90::SoCfg<E, 2, 32>;
  alignas(1024) static E tile[64 * 128];
  Tensor kt = make_tensor(make_smem_ptr(tile), typename Cfg::LayKt{});
  Tensor k = make_tensor(make_smem_ptr(tile), typename Cfg::LayRowsD{});
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 128; ++c)
      ASSERT_EQ(raw_pointer_cast(&k(r, c)), raw_pointer_cast(&kt(c, r))) << "row " << r << ", key " << c;
}

// R is formed from X's accumulator and stored at VN's pair offsets, so X's element i (MmaRowsS)
// must be VN's element i (MmaRowsC) in every thread.
template <class E, int N>
void check_x_is_vn() {
  using Cfg = sm90::SoCfg<E, 2, N>;
  typename Cfg::MmaRowsS mx;
  typename Cfg::MmaRowsC mv;
  for (int t = 0; t < 128; ++t) {
    Tensor cx = mx.get_thread_slice(t).partition_C(make_identity_tensor(Shape<_64, Int<N>>{}));
    Tensor cv = mv.get_thread_slice(t).partition_C(make_identity_tensor(Shape<_64, Int<N>>{}));
    ASSERT_EQ(size(cx), size(cv));
    for (int i = 0; i < size(cx); ++i) {
      ASSERT_EQ(get<0>(cx(i)), get<0>(cv(i))) << "thread " << t << ", element " << i;
      ASSERT_EQ(get<1>(cx(i)), get<1>(cv(i))) << "thread " << t << ", element " << i;
    }
  }
}

// Every pair of the S and VN accumulators is stored exactly once: the publish and the ṽ epilogue
// walk q over N / 2 and N / 4 pairs, which must cover each thread's elements.
template <class E, int N>
void check_pairs_cover_accumulators() {
  using Cfg = sm90::SoCfg<E, 2, N>;
  typename Cfg::MmaKeys mma;
  Tensor cS = mma.get_thread_slice(0).partition_C(make_identity_tensor(Shape<_128, Int<N>>{}));
  std::vector<int> seen(size(cS), 0);
  for (int q = 0; q < N / 2; ++q) {
    seen.at(sm90::so_pair_elem<N>(q)) += 1;
    seen.at(sm90::so_pair_elem<N>(q) + 1) += 1;
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "element " << i;
}

TEST(GdnStateOutputSm90Layout, SHiPairsAtBasesPlusImmediatesBf16) {
  check_s_hi_pairs<cutlass::bfloat16_t, 32>();
  check_s_hi_pairs<cutlass::bfloat16_t, 64>();
}

TEST(GdnStateOutputSm90Layout, SHiPairsAtBasesPlusImmediatesFp16) {
  check_s_hi_pairs<cutlass::half_t, 32>();
  check_s_hi_pairs<cutlass::half_t, 64>();
}

TEST(GdnStateOutputSm90Layout, VtPairsAtBasesPlusImmediatesBf16) {
  check_vt_pairs<cutlass::bfloat16_t, 32>();
  check_vt_pairs<cutlass::bfloat16_t, 64>();
}

TEST(GdnStateOutputSm90Layout, VtPairsAtBasesPlusImmediatesFp16) {
  check_vt_pairs<cutlass::half_t, 32>();
  check_vt_pairs<cutlass::half_t, 64>();
}

TEST(GdnStateOutputSm90Layout, KtTileReadAsK) {
  check_kt_is_k<cutlass::bfloat16_t>();
  check_kt_is_k<cutlass::half_t>();
}

TEST(GdnStateOutputSm90Layout, XAccumulatorIsVn) {
  check_x_is_vn<cutlass::bfloat16_t, 32>();
  check_x_is_vn<cutlass::bfloat16_t, 64>();
}

TEST(GdnStateOutputSm90Layout, PairsCoverTheAccumulators) {
  check_pairs_cover_accumulators<cutlass::bfloat16_t, 32>();
  check_pairs_cover_accumulators<cutlass::bfloat16_t, 64>();
}

}  // namespace
