// KV operand policies of the Hopper prefill kernel: where the TMA loads of a KV tile read from.
// Like the mask and score-mod policies they are compile-time types (one per instantiation in
// sm90_fwd_list.h); the producer asks one for the TMA coordinates of each K / V tile, and the
// consumers never see the difference (they work on logical key positions only).
//
//   KvContiguous  batched [B, Sk, Hkv, D] or ragged [total_k, Hkv, D] (cu_seqlens_k): TMA sees
//                 (rows, D, heads, batch); a tile is rows k_offset + first key, of its batch.
//   KvPaged       a cache [num_pages, page_size, Hkv, D] with a page table [B, max_pages]: TMA
//                 sees (page_size, D, heads, num_pages); a tile is rows of one page, found in the
//                 page table. Needs page_size a multiple of kBlockN (the dispatcher sends other
//                 page sizes to the portable kernels), so a tile starting at n·N lies in one page.
//
// The last KV tile ends at the sequence's last key (tile_first_key): it starts at sk - N, below
// n·N, and with pages that start may lie in the previous page. KvPaged loads it from the page of
// its last key instead, at row (sk - N) - page_start, which is then negative: TMA fills rows at
// negative coordinates with zeros. Those rows are the keys below n·N, which the consumers mask
// anyway (and 0 x 0 in P·V is 0), and neither the previous page nor any cache slot past the
// sequence's end (possibly NaN) is read. A sequence shorter than N is the same case in page 0.
#pragma once

#include <cstdint>

#include "cuda/attention/sm90/sm90_seqlen.h"
#include "cuda/common/fast_divmod.h"

namespace attnkit::gpu::sm90 {

// TMA coordinates of one KV tile: its first row, and the batch (contiguous) or page (paged) index.
struct KvTileCoord {
  int row;
  int outer;
};

struct KvContiguous {
  static constexpr bool kPaged = false;
#if defined(__CUDACC__)
  // Row extent of the K / V tensors as TMA sees them (k_rows: SeqLens::k_rows).
  __device__ __forceinline__ int tma_rows(int k_rows) const { return k_rows; }
  template <int kBlockN>
  __device__ __forceinline__ KvTileCoord tile(const SeqInfo& si, int first_key) const {
    return {si.k_offset + first_key, si.kv_batch};
  }
#endif
};

struct KvPaged {
  static constexpr bool kPaged = true;
  const int32_t* page_table = nullptr;  // int32 [B, max_pages]
  int64_t pt_batch_stride = 0, pt_col_stride = 1;
  FastDiv page_size;  // a multiple of kBlockN (a multiply-shift: the producer has few registers)
  int num_pages = 0;  // >= 1

#if defined(__CUDACC__)
  __device__ __forceinline__ int tma_rows(int) const { return page_size.d; }
  // first_key > -kBlockN (the sequence has a key), so the tile's last key first_key + N - 1 >= 0.
  template <int kBlockN>
  __device__ __forceinline__ KvTileCoord tile(const SeqInfo& si, int first_key) const {
    const int pi = page_size.div(first_key + kBlockN - 1);  // page of the tile's last key
    int pg;
    // Not cached by the compiler across tiles (asm volatile, as SeqLens::load): the producer
    // thread has 24 registers.
    asm volatile("ld.global.nc.s32 %0, [%1];"
                 : "=r"(pg)
                 : "l"(page_table + si.kv_batch * pt_batch_stride + pi * pt_col_stride));
    // Device-side indices are never trusted: a page outside the pool reads a valid page instead.
    pg = min(max(pg, 0), num_pages - 1);
    return {first_key - pi * page_size.d, pg};
  }
#endif
};

}  // namespace attnkit::gpu::sm90
