// The Hopper decode kernel's load and shared-memory arithmetic (sm90_decode_tiles.h), checked by
// brute force where CI runs it:
//   - the box rule: over every sequence length, tile and box size, each key of the sequence is
//     owned by exactly one (tile, row); no row past the sequence's end is loaded; a paged box never
//     loads a row of another page (rows below its page come back as TMA's zero fill);
//   - decode_box_rows: boxes divide the tile and the page, and fill whole swizzle atoms;
//   - the lane / step split of the swizzled address equals the element address for every lane
//     pattern the kernel uses, and the swizzle keeps an ldmatrix's eight rows in distinct banks.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "cuda/attention/sm90/sm90_decode_tiles.h"

namespace {

using attnkit::gpu::sm90::decode_box_first;
using attnkit::gpu::sm90::decode_box_key;
using attnkit::gpu::sm90::decode_box_rows;
using attnkit::gpu::sm90::kDecodeTmaKeys;
using attnkit::gpu::sm90::kNoBox;
using attnkit::gpu::sm90::sw128_lane;
using attnkit::gpu::sm90::sw128_offset;
using attnkit::gpu::sm90::sw128_step;

TEST(Sm90DecodeTiles, EveryKeyOwnedOnceAndNothingPastTheEndLoaded) {
  constexpr int kN = kDecodeTmaKeys;
  for (int page : {0, 8, 16, 24, 48, 64, 128, 256}) {  // 0: contiguous
    const int rows = decode_box_rows(kN, page);
    ASSERT_GE(rows, 8) << "page " << page;
    for (int sk = 0; sk <= 3 * kN + 17; ++sk) {
      std::vector<int> owned(sk, 0);
      const int tiles = (sk + kN - 1) / kN;
      for (int t = 0; t < tiles; ++t) {
        for (int jb = t * kN; jb < (t + 1) * kN; jb += rows) {
          const int first = decode_box_first(jb, rows, sk);
          if (first == kNoBox) {
            EXPECT_GE(jb, sk);
            continue;
          }
          // Rows loaded from the cache (others are zero fill below the sequence or the page).
          const int page_start = page > 0 ? (jb / page) * page : 0;
          for (int r = 0; r < rows; ++r) {
            const int key = first + r;
            const bool loaded = key >= 0 && key >= page_start;
            if (loaded) {
              EXPECT_LT(key, sk) << "a slot past the end is read: sk " << sk << " jb " << jb;
              if (page > 0) EXPECT_LT(key, page_start + page) << "another page is read";
            }
            int k = -1;
            if (decode_box_key(jb, rows, sk, r, &k)) {
              ASSERT_TRUE(loaded) << "an owned row must hold cache data";
              ASSERT_GE(k, 0);
              ASSERT_LT(k, sk);
              EXPECT_EQ(k, key);
              ++owned[k];
            }
          }
        }
      }
      for (int k = 0; k < sk; ++k)
        ASSERT_EQ(owned[k], 1) << "page " << page << " sk " << sk << " key " << k;
    }
  }
}

TEST(Sm90DecodeTiles, BoxRowsDivideTileAndPage) {
  EXPECT_EQ(decode_box_rows(kDecodeTmaKeys, 0), kDecodeTmaKeys);
  for (int page = 1; page <= 1024; ++page) {
    const int r = decode_box_rows(kDecodeTmaKeys, page);
    if (page % 8 != 0) {
      EXPECT_EQ(r, 0) << page;
      continue;
    }
    ASSERT_GE(r, 8);
    EXPECT_EQ(kDecodeTmaKeys % r, 0);
    EXPECT_EQ(page % r, 0);
    EXPECT_TRUE(r == kDecodeTmaKeys || page % (2 * r) != 0) << "largest such box: " << page;
  }
}

TEST(Sm90DecodeTiles, LaneStepSplitMatchesElementOffset) {
  constexpr int kN = kDecodeTmaKeys;
  for (int d : {64, 128, 256}) {
    const int dv_warp = d / 2;
    for (int lane = 0; lane < 32; ++lane) {
      const int mi = lane / 8, mr = lane % 8;
      for (int kh = 0; kh < 4; ++kh) {
        // K (ldmatrix, non-transposed): steps of 16 over all of D.
        const int k_row = kh * 16 + (mi >> 1) * 8 + mr, k_col0 = (mi & 1) * 8;
        const auto kl = sw128_lane(k_row, k_col0, kN);
        for (int kk = 0; kk < d / 16; ++kk)
          ASSERT_EQ(sw128_step(kl, kk * 16, kN), sw128_offset(k_row, k_col0 + kk * 16, kN))
              << "K d " << d << " lane " << lane << " kk " << kk;
        // V (ldmatrix.trans): steps of 16 over this warp's Dv half.
        for (int dh = 0; dh < 2; ++dh) {
          const int v_row = kh * 16 + (mi & 1) * 8 + mr, v_col0 = dh * dv_warp + (mi >> 1) * 8;
          const auto vl = sw128_lane(v_row, v_col0, kN);
          for (int nn = 0; nn < dv_warp / 16; ++nn)
            ASSERT_EQ(sw128_step(vl, nn * 16, kN), sw128_offset(v_row, v_col0 + nn * 16, kN))
                << "V d " << d << " lane " << lane << " dh " << dh << " nn " << nn;
        }
      }
    }
  }
}

TEST(Sm90DecodeTiles, SwizzleIsABijectionWithConflictFreeColumns) {
  constexpr int kN = kDecodeTmaKeys, kD = 128;
  std::set<int> seen;
  for (int r = 0; r < kN; ++r)
    for (int c = 0; c < kD; ++c) {
      const int off = sw128_offset(r, c, kN);
      ASSERT_EQ(off % 2, 0);
      ASSERT_LT(off, kN * kD * 2);
      ASSERT_TRUE(seen.insert(off).second) << "two elements at byte " << off;
    }
  // Eight consecutive rows at one logical 16-byte chunk: eight distinct 16-byte bank groups.
  for (int r0 = 0; r0 < kN; r0 += 8)
    for (int c = 0; c < kD; c += 8) {
      std::set<int> groups;
      for (int r = r0; r < r0 + 8; ++r) groups.insert((sw128_offset(r, c, kN) / 16) % 8);
      EXPECT_EQ(groups.size(), 8u) << "rows " << r0 << " col " << c;
    }
}

}  // namespace
