// The KV operand: where key/value row j of sequence b lives, for every layout, behind one
// interface that the prefill, decode and combine paths share.
//   contiguous [B, Sk, Hkv, D]:       (outer = b,    row = j)
//   ragged     [total_k, Hkv, D]:     (outer = 0,    row = cu_seqlens_k[b] + j)
//   paged      [pages, P, Hkv, D]:    (outer = page_table[b, j / P], row = j % P)
// and the element offset is outer * outer_stride + row * row_stride + head * head_stride with K's
// or V's own strides (they are separate tensors).
//
// Device-side index tensors are never trusted: sequence lengths are clamped to the tensor extents
// and a page index outside [0, num_pages) is clamped into that range, so a corrupt page table reads
// valid (if meaningless) cache rows and never memory outside K / V.
#pragma once

#include <cstdint>

#include "cuda/common/fast_divmod.h"

namespace attnkit::gpu {

enum class KvKind : int { kContiguous = 0, kRagged = 1, kPaged = 2 };

struct KvOperand {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_outer_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_outer_stride = 0, v_row_stride = 0, v_head_stride = 0;
  KvKind kind = KvKind::kContiguous;
  int k_rows = 0;  // contiguous: Sk; ragged: total_k; paged: max_pages * page_size (a length bound)

  const int32_t* cu_seqlens_k = nullptr;
  int64_t cu_k_stride = 1;
  const int32_t* seqused_k = nullptr;  // optional (contiguous / paged)
  int64_t seqused_stride = 1;
  const int32_t* page_table = nullptr;
  int64_t pt_batch_stride = 0, pt_col_stride = 1;
  int num_pages = 0;
  FastDiv page_size;

#if defined(__CUDACC__)
  struct Seq {
    int start;   // first row (ragged) or 0
    int length;  // keys used, clamped
  };

  __device__ __forceinline__ Seq sequence(int b) const {
    Seq s{0, k_rows};
    if (kind == KvKind::kRagged) {
      int lo = __ldg(cu_seqlens_k + b * cu_k_stride);
      int hi = __ldg(cu_seqlens_k + (b + 1) * cu_k_stride);
      lo = min(max(lo, 0), k_rows);
      hi = min(max(hi, lo), k_rows);
      s = {lo, hi - lo};
    } else if (seqused_k != nullptr) {
      s.length = min(max(__ldg(seqused_k + b * seqused_stride), 0), k_rows);
    }
    if (kind == KvKind::kPaged && num_pages <= 0) s.length = 0;
    return s;
  }

  // (outer, row) of key j (0 <= j < length) of sequence b whose first row is `start`.
  __device__ __forceinline__ void locate(int b, int start, int j, int64_t& outer, int& row) const {
    if (kind == KvKind::kPaged) {
      int pi, r;
      page_size.divmod(j, pi, r);
      outer = page(b, pi);
      row = r;
    } else {
      outer = kind == KvKind::kContiguous ? b : 0;
      row = start + j;
    }
  }
  // Page pi of sequence b (paged only), clamped into the pool.
  __device__ __forceinline__ int page(int b, int pi) const { return clamp_page(page_entry(b, pi)); }
  // The same in two steps, so that a kernel can issue the read early and clamp where it uses it.
  __device__ __forceinline__ int page_entry(int b, int pi) const {
    return __ldg(page_table + b * pt_batch_stride + pi * pt_col_stride);
  }
  __device__ __forceinline__ int clamp_page(int entry) const {
    return min(max(entry, 0), num_pages - 1);
  }
  // Warms L2 with the page-table entries of keys [j_begin, j_end) of sequence b (paged only; at
  // most one entry per thread of `threads`, all within the table since j_end <= k_rows). A kernel
  // that must read the sequence length before it knows which entries it needs issues this first,
  // so that its page-table reads then hit L2 instead of waiting on memory a second time.
  __device__ __forceinline__ void prefetch_pages(int b, int j_begin, int j_end, int tid,
                                                 int threads) const {
    if (kind != KvKind::kPaged || j_end <= j_begin || j_end > k_rows || tid >= threads) return;
    const int pi = page_size.div(j_begin) + tid;
    if (pi > page_size.div(j_end - 1)) return;
    const int32_t* entry = page_table + b * pt_batch_stride + pi * pt_col_stride;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(entry));
  }
  __device__ __forceinline__ int64_t k_offset(int64_t outer, int row, int head) const {
    return outer * k_outer_stride + row * k_row_stride + head * k_head_stride;
  }
  __device__ __forceinline__ int64_t v_offset(int64_t outer, int row, int head) const {
    return outer * v_outer_stride + row * v_row_stride + head * v_head_stride;
  }
#endif
};

}  // namespace attnkit::gpu
