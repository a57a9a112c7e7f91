// Where the Hopper decode kernel's TMA boxes read K / V from, and where an element of a tile sits
// in shared memory. Plain arithmetic, brute-force checked on the CPU (sm90_decode_tiles_test.cpp).
//
// A tile is kBlockN keys, loaded as kBlockN / R boxes of R rows (R divides kBlockN and, for a
// paged cache, the page size, so a box never spans two pages) times D / 64 column boxes of 64
// 16-bit elements (128 bytes: the width TMA's 128-byte swizzle takes).
//
// Box rule. The box of keys [jb, jb + R) of a sequence with sk keys loads R rows starting at key
//   first = jb          when jb + R <= sk  (a full box),
//   first = sk - R      when jb < sk < jb + R  (the box holding the last key: shifted back so that
//                       it ends at the last key; its rows below jb repeat keys of the previous box
//                       or lie before the sequence, and are masked),
//   none (zero fill)    when jb >= sk.
// Row r of the box holds key first + r, counted only when jb <= key < sk. So no cache slot past a
// sequence's end is ever read: such slots may hold anything (NaN), and a NaN in V would poison
// P·V even with P = 0. A shifted box of a paged cache starts at a row below its page's first row
// when sk - R < page start: TMA fills rows at negative coordinates with zeros, so it never reads
// the previous page either.
//
// Shared memory. Column box c of a tile is [kBlockN rows][64 elements], rows of 128 bytes, with
// the 16-byte chunk q of row r stored at chunk q ^ (r % 8) (TMA's 128-byte swizzle; a tile's
// boxes start at multiples of 1024 bytes, so the pattern only depends on r). Eight rows read
// by one ldmatrix at the same logical chunk then fall in eight different bank groups.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ATTNKIT_SM90_DECODE_HD __host__ __device__ __forceinline__
#else
#define ATTNKIT_SM90_DECODE_HD inline
#endif

namespace attnkit::gpu::sm90 {

inline constexpr int kSwizzleCols = 64;  // 16-bit elements per 128-byte swizzled row
inline constexpr int kDecodeTmaKeys = 64;  // keys per tile of the Hopper decode kernel

// First key the box of keys [jb, jb + R) loads, by the box rule; kNoBox when it loads nothing.
inline constexpr int kNoBox = -0x40000000;
ATTNKIT_SM90_DECODE_HD int decode_box_first(int jb, int rows, int sk) {
  if (jb >= sk) return kNoBox;
  return jb + rows <= sk ? jb : sk - rows;
}

// Whether row r of that box holds a key the box owns (jb <= key < sk), and which key.
ATTNKIT_SM90_DECODE_HD bool decode_box_key(int jb, int rows, int sk, int r, int* key) {
  const int first = decode_box_first(jb, rows, sk);
  if (first == kNoBox) return false;
  *key = first + r;
  return *key >= jb && *key < sk;
}

// Byte offset of element (row, col) of a tile of `tile_rows` rows of 16-bit elements.
ATTNKIT_SM90_DECODE_HD int sw128_offset(int row, int col, int tile_rows) {
  const int box = col / kSwizzleCols, chunk = (col % kSwizzleCols) / 8;
  return box * tile_rows * 128 + row * 128 + ((chunk ^ (row % 8)) * 16) + (col % 8) * 2;
}

// The same for the 16-byte chunk an ldmatrix lane reads, split so that the kernel computes a
// lane's part once and adds a constant per column step: element column col0 + step * 16, with
// col0 % 16 in {0, 8} (the lane's half of a 16-wide step) and step * 16 a column offset.
//   lane part:  row * 128 + box(col0) * tile_rows * 128, xor key ((col0 % 64) / 8) ^ (row % 8)
//   step part:  box(step * 16) * tile_rows * 128, chunk ((step * 16) % 64) / 8, xored with the key
// Valid when col0 % 64 + (step * 16) % 64 < 64 never carries into the next box, which holds for
// col0 % 64 in {0, 8, 32, 40} and steps of at most 16 columns past col0 within its 32-column half.
struct SwizzleLane {
  int base;  // bytes
  int key;   // 0..7
};
ATTNKIT_SM90_DECODE_HD SwizzleLane sw128_lane(int row, int col0, int tile_rows) {
  return {row * 128 + (col0 / kSwizzleCols) * tile_rows * 128,
          ((col0 % kSwizzleCols) / 8) ^ (row % 8)};
}
ATTNKIT_SM90_DECODE_HD int sw128_step(SwizzleLane lane, int step_cols, int tile_rows) {
  return lane.base + (step_cols / kSwizzleCols) * tile_rows * 128 +
         ((((step_cols % kSwizzleCols) / 8)) ^ lane.key) * 16;
}

// Rows per TMA box for a decode tile of kBlockN keys: the tile itself for contiguous and ragged
// caches (page_size 0), else the largest power of two <= kBlockN dividing the page size; 0 when
// that is below 8 (a box must fill whole 1024-byte swizzle atoms: such caches are not taken).
ATTNKIT_SM90_DECODE_HD int decode_box_rows(int block_n, int page_size) {
  if (page_size <= 0) return block_n;
  int r = block_n;
  while (r >= 8 && page_size % r != 0) r /= 2;
  return r >= 8 ? r : 0;
}

}  // namespace attnkit::gpu::sm90
