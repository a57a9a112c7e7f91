// Host-side description of one Hopper prefill launch: plain pointers, extents and strides (elements),
// no CuTe types, so the dispatcher can fill it without including the kernel. The launcher turns the
// Q/K/V parts into TMA descriptors.
#pragma once

#include <cstdint>

namespace attnkit::gpu {

// Keys per KV tile of the variants of head dim d (FwdConfig's default): paged K/V runs on sm90
// only with page sizes that are a multiple of it.
constexpr int sm90_kv_block(int d) { return d <= 192 ? 128 : 64; }

// Query rows per work tile of the variants of head dim dqk (FwdConfig's default: three consumer
// warpgroups of 64 rows at 64, two otherwise; sm90_fwd_launch.cuh checks that they agree).
constexpr int sm90_q_block(int dqk) { return dqk == 64 ? 192 : 128; }

// Most split-KV splits per query tile (the portable planner caps at the same count).
constexpr int kSm90MaxSplits = 128;

struct Sm90FwdArgs {
  // Batched: Q/O [B, Sq, Hq, D], K/V [B, Sk, Hkv, D]. Ragged Q (cu_q): Q/O [total_q, Hq, D], LSE
  // [total_q, Hq]; ragged K (cu_k): K/V [total_k, Hkv, D]. A ragged tensor has batch extent 1 and
  // batch stride 0 here, and sq / sk are then its total rows.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // optional, any strides
  int64_t q_batch = 0, q_row = 0, q_head = 0;
  int64_t k_batch = 0, k_row = 0, k_head = 0;
  int64_t v_batch = 0, v_row = 0, v_head = 0;
  int64_t o_batch = 0, o_row = 0, o_head = 0;
  int64_t lse_batch = 0, lse_row = 0, lse_head = 0;
  int batch = 0;  // sequences
  int sq = 0, sk = 0;  // rows of Q / K per batch entry (ragged: of the whole tensor)
  int q_batches = 0, k_batches = 0;  // batch extents of the Q and K/V tensors (1 when ragged)
  int max_seqlen_q = 0;  // longest sequence's queries (an upper bound with device indices)
  int hq = 0, hkv = 0;
  float scale = 0.f;
  bool pingpong = true;  // consumer warpgroups take turns issuing GEMMs (named barriers)
  int sm_count = 0;      // the device's SMs (the dispatcher's cached device facts): grid sizes
  // The causal variants at d64 / d128 / d256, contiguous K/V: a persistent grid over pairs of
  // query tiles, one long and one short (PersistentCausalPairScheduler), at d64 with 128-row tiles
  // (two consumer warpgroups); otherwise the variant's scheduler (sm90_fwd_launch.cuh).
  bool causal_pairs = false;

  // Per-sequence lengths (int32, device). Ragged Q takes the varlen scheduler; per-sequence keys
  // alone keep the variant's (sm90_fwd_launch.cuh).
  const int32_t* cu_seqlens_q = nullptr;
  int64_t cu_q_stride = 1;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t cu_k_stride = 1;
  const int32_t* seqused_k = nullptr;
  int64_t seqused_k_stride = 1;

  // Paged K/V (the *_paged_* variants): K/V [num_pages, page_size, Hkv, D], so k / v _batch are the
  // page strides, sk is the page size and k_batches the number of pages. Keys per sequence come
  // from seqused_k (required), bounded by max_pages * page_size.
  const int32_t* page_table = nullptr;  // int32 [B, max_pages]
  int64_t pt_batch_stride = 0, pt_col_stride = 1;
  int max_pages = 0;

  // Read only by the variants whose policies use them (sm90_fwd_list.h).
  int window_left = -1, window_right = -1, chunk_size = 0;
  float softcap = 0.f;
  const float* sinks = nullptr;
  int64_t sinks_stride = 1;

  // Split-KV (num_splits > 1): every variant, at run time. Each split writes normalised fp32
  // partial O [split][part_rows][hq][Dv] and natural-log LSE [split][part_rows][hq] (sinks left
  // out), part_rows = batch * sq (ragged Q: total_q); o and lse are left to the combine kernel.
  int num_splits = 1;
  float* part_o = nullptr;
  float* part_lse = nullptr;
  int64_t part_rows = 0;
};

}  // namespace attnkit::gpu
