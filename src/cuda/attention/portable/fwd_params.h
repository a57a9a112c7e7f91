// Everything one launch of the portable attention kernel reads, filled on the host from the
// validated problem. Plain data (no CUDA types) so the dispatcher and the instantiations share it.
#pragma once

#include <cstdint>

#include "cuda/attention/kv/kv_operand.h"

namespace attnkit::gpu {

struct FwdParams {
  // Q / O: element strides of (batch, row, head); ragged layouts have batch stride 0 and rows
  // counted from cu_seqlens_q[b].
  const void* q = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  void* o = nullptr;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  // optional
  int64_t lse_batch_stride = 0, lse_row_stride = 0, lse_head_stride = 0;

  KvOperand kv;  // K and V rows, contiguous / ragged / paged

  const int32_t* cu_seqlens_q = nullptr;  // ragged Q when set
  int64_t cu_q_stride = 1;
  int batch = 0, hq = 0, hkv = 0;
  FastDiv group;       // hq / hkv: query heads per KV head, packed into the tile's rows
  int q_rows = 0;      // batched: Sq; ragged: total_q (the clamp for cu_seqlens_q)
  int max_seqlen_q = 0;

  float scale = 1.f;       // natural-log units
  float scale_log2 = 1.f;  // scale * log2(e)
  float softcap = 0.f;
  const float* alibi = nullptr;
  int64_t alibi_stride = 1;
  const float* sinks = nullptr;
  int64_t sinks_stride = 1;
  int window_left = -1, window_right = -1, chunk_size = 0;

  // FP8 (e4m3) K / V (decode kernel): the keys are k_scale[.] * K, the values v_scale[.] * V. The
  // scale of key (outer, row) of KV head h (KvOperand's coordinates) is at element
  // outer * outer_stride + row * row_stride + h * head_stride: all strides 0 for one scale per
  // tensor, only head_stride for one per KV head, all three for one per (token, KV head).
  struct KvScale {
    const float* data = nullptr;
    int64_t outer_stride = 0, row_stride = 0, head_stride = 0;
    bool per_token = false;
  };
  bool kv_fp8 = false;
  KvScale k_scale, v_scale;

  // Split-KV: num_splits > 1 writes fp32 partials (normalised O and natural-log LSE, sinks left
  // out) to part_o [split][flat_row][hq][dv] and part_lse [split][flat_row][hq]; a combine merges
  // them into o / lse (prefill: a second kernel; decode: the kernel's last split of each KV head).
  // flat_row = ragged ? row : b * Sq + row.
  int num_splits = 1;
  float* part_o = nullptr;
  float* part_lse = nullptr;
  int64_t part_rows = 0;  // flat rows per split
  // Decode kernel only: one arrival counter per (sequence, KV head), zero at launch; the last
  // split to arrive merges the partials (decode_merge.cuh).
  unsigned* split_counters = nullptr;
};

// Where sequence b's queries are: [start, start + length) in Q's row dimension. Ragged offsets come
// from the device and are clamped to Q's rows, as KvOperand::sequence clamps the keys. The attention
// and combine kernels both call this, so their view of a sequence cannot drift apart.
struct QSeq {
  int start, length;
};
__device__ __forceinline__ QSeq q_sequence(const FwdParams& p, int b) {
  if (p.cu_seqlens_q == nullptr) return {0, p.q_rows};
  int lo = __ldg(p.cu_seqlens_q + b * p.cu_q_stride);
  int hi = __ldg(p.cu_seqlens_q + (b + 1) * p.cu_q_stride);
  lo = min(max(lo, 0), p.q_rows);
  hi = min(max(hi, lo), p.q_rows);
  return {lo, hi - lo};
}

}  // namespace attnkit::gpu
