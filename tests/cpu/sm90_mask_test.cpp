// The Hopper prefill kernel's mask policies (sm90_mask.h) are plain host/device arithmetic: checked
// here, where CI runs it, against the API's definition of a visible key (attention.h) by brute
// force over every (row, key) of many shapes and masks:
//   - row_bounds gives exactly the visible keys of a row, clamped to the sequence;
//   - kv_tile_range's [begin, end) holds every visible key of the query tile, and each tile in
//     [full_begin, full_end) is visible whole to every row (so skipping its mask is exact);
//   - MaskNone and MaskCausal agree with MaskLocal set to the same mask;
//   - split_kv_range (split-KV) cuts every such range into shares that cover it in order, differ
//     by at most one tile, and need the mask exactly where the whole range does.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "attnkit/attention.h"
#include "cuda/attention/sm90/sm90_mask.h"

namespace {

using attnkit::Mask;
using attnkit::gpu::sm90::KvTileRange;
using attnkit::gpu::sm90::MaskCausal;
using attnkit::gpu::sm90::MaskLocal;
using attnkit::gpu::sm90::MaskNone;
using attnkit::gpu::sm90::kv_tile_range;
using attnkit::gpu::sm90::row_bounds;
using attnkit::gpu::sm90::split_kv_range;

// attention.h, literally: key j visible to row i of a sequence with sq queries and sk keys.
bool visible(const Mask& m, int i, int j, int sq, int sk) {
  const long long p = static_cast<long long>(i) + sk - sq;
  auto floor_div = [](long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  if (j < 0 || j >= sk) return false;
  if (m.window_left >= 0 && j < p - m.window_left) return false;
  if (m.window_right >= 0 && j > p + m.window_right) return false;
  if (m.chunk_size > 0 && floor_div(j, m.chunk_size) != floor_div(p, m.chunk_size)) return false;
  return true;
}

MaskLocal local_of(const Mask& m) {
  MaskLocal l;
  l.left = m.window_left;
  l.right = m.window_right;
  l.chunk = m.chunk_size;
  return l;
}

template <int kBlockM, int kBlockN, class M>
void check_against_api(const M& mask, const Mask& api, int sq, int sk, int* checked) {
  for (int i = 0; i < sq; ++i) {
    const auto rb = row_bounds(mask, i, sq, sk);
    for (int j = 0; j < sk; ++j)
      ASSERT_EQ(j >= rb.lo && j <= rb.hi, visible(api, i, j, sq, sk))
          << "row " << i << " key " << j << " sq " << sq << " sk " << sk << " mask ("
          << api.window_left << "," << api.window_right << "," << api.chunk_size << ")";
  }
  const int m_blocks = (sq + kBlockM - 1) / kBlockM;
  const int n_tiles = (sk + kBlockN - 1) / kBlockN;
  for (int mb = 0; mb < m_blocks; ++mb) {
    const KvTileRange r = kv_tile_range<kBlockM, kBlockN>(mask, mb, sq, sk);
    const int rows_end = std::min(sq, (mb + 1) * kBlockM);
    ASSERT_LE(r.begin, r.full_begin);
    ASSERT_LE(r.full_begin, r.full_end);
    if (r.end > r.begin) ASSERT_LE(r.full_end, r.end);
    for (int n = 0; n < n_tiles; ++n) {
      bool any = false, all = true;
      for (int i = mb * kBlockM; i < rows_end; ++i)
        for (int j = n * kBlockN; j < (n + 1) * kBlockN; ++j) {
          const bool v = visible(api, i, j, sq, sk);
          any |= v;
          all &= v;
        }
      const bool in_range = n >= r.begin && n < r.end;
      if (any) ASSERT_TRUE(in_range) << "tile " << n << " of query tile " << mb << " has visible keys";
      if (in_range && !r.needs_mask(n))
        ASSERT_TRUE(all) << "tile " << n << " of query tile " << mb << " is run unmasked but is not "
                         << "visible whole (sq " << sq << " sk " << sk << ")";
    }
    ++*checked;
  }
}

TEST(Sm90Mask, MatchesTheApiDefinition) {
  const Mask masks[] = {Mask::none(),
                        Mask::causal(),
                        Mask::sliding_window(0, 0),
                        Mask::sliding_window(32, 0),
                        Mask::sliding_window(16, 8),
                        Mask::sliding_window(-1, 5),
                        Mask::sliding_window(300, 0),
                        Mask::sliding_window(200, 150),
                        Mask::sliding_window(450, -1),
                        Mask::chunked(64),
                        Mask::chunked(48, true),
                        Mask::chunked(384, true),
                        Mask::chunked(1),
                        {20, 3, 32},
                        {500, 0, 256}};
  const std::pair<int, int> lens[] = {{1, 1},     {17, 1},    {150, 150}, {97, 600},
                                      {700, 300}, {129, 255}, {300, 0},   {64, 64}};
  int checked = 0;
  for (const Mask& m : masks)
    for (auto [sq, sk] : lens) {
      check_against_api<128, 128>(local_of(m), m, sq, sk, &checked);
      check_against_api<192, 128>(local_of(m), m, sq, sk, &checked);
      check_against_api<128, 64>(local_of(m), m, sq, sk, &checked);
      if (m.is_none()) check_against_api<128, 128>(MaskNone{}, m, sq, sk, &checked);
      if (m.window_left < 0 && m.window_right == 0 && m.chunk_size == 0) {
        check_against_api<128, 128>(MaskCausal{}, m, sq, sk, &checked);
        check_against_api<192, 128>(MaskCausal{}, m, sq, sk, &checked);
      }
    }
  EXPECT_GT(checked, 500);
}

TEST(Sm90Mask, RandomMasksAndShapes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> len(0, 400), win(-1, 300), chunk(0, 200);
  int checked = 0;
  for (int k = 0; k < 150; ++k) {
    Mask m{win(rng), win(rng), k % 3 == 0 ? chunk(rng) : 0};
    check_against_api<128, 128>(local_of(m), m, len(rng), len(rng), &checked);
    check_against_api<64, 64>(local_of(m), m, len(rng) + 1, len(rng), &checked);
  }
  EXPECT_GT(checked, 100);
}

// The shares of one range for 1..S splits: contiguous, in split order, covering [begin, end) with
// sizes q or q + 1, and each tile masked in its share exactly when it is in the whole range.
void check_shares(const KvTileRange& r, int splits, int* checked) {
  const attnkit::gpu::FastDiv div(splits);
  const int count = std::max(r.end - r.begin, 0);
  int next = r.begin;
  for (int s = 0; s < splits; ++s) {
    const KvTileRange sh = split_kv_range(r, s, div);
    if (count == 0) {
      ASSERT_LE(sh.end, sh.begin) << "split " << s << " of an empty range has tiles";
      continue;
    }
    ASSERT_EQ(sh.begin, next) << "split " << s << " of " << splits;
    const int size = sh.end - sh.begin;
    ASSERT_TRUE(size == count / splits || size == count / splits + 1)
        << "split " << s << " of " << splits << " has " << size << " of " << count << " tiles";
    ASSERT_TRUE(sh.begin <= sh.full_begin && sh.full_begin <= sh.full_end && sh.full_end <= sh.end);
    for (int n = sh.begin; n < sh.end; ++n)
      ASSERT_EQ(sh.needs_mask(n), r.needs_mask(n)) << "tile " << n << " split " << s;
    next = sh.end;
  }
  if (count > 0) ASSERT_EQ(next, r.end) << splits << " splits leave tiles out";
  ++*checked;
}

TEST(Sm90Mask, SplitSharesCoverTheRange) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> len(0, 3000), win(-1, 700), chunk(0, 500);
  int checked = 0;
  for (int k = 0; k < 120; ++k) {
    const Mask m = k % 4 == 0 ? Mask::none()
                   : k % 4 == 1 ? Mask::causal()
                                : Mask{win(rng), win(rng), k % 3 == 0 ? chunk(rng) : 0};
    const int sq = len(rng) + 1, sk = len(rng);
    for (int mb = 0; mb * 128 < sq; mb += 3) {
      const KvTileRange r = kv_tile_range<128, 64>(local_of(m), mb, sq, sk);
      for (int splits : {1, 2, 3, 7, 16, 128}) check_shares(r, splits, &checked);
    }
  }
  // A long range and the largest split count: no overflow in the share arithmetic.
  const KvTileRange big{0, 1 << 24, 5, (1 << 24) - 3};
  for (int splits : {3, 127, 128}) check_shares(big, splits, &checked);
  EXPECT_GT(checked, 1000);
}

}  // namespace
