// Per-sequence extents of the Hopper prefill kernel: batched tensors (every sequence Sq x Sk),
// ragged Q and/or K (packed rows, cu_seqlens) and seqused_k, behind one lookup the producer and
// the consumers both make per work tile. Ragged or not is a run-time property of one kernel.
//
// TMA sees a ragged tensor as one sequence of all its rows (batch extent 1); a tile of sequence b
// starts at row offset + m_block * kBlockM of it, so rows past the sequence's end are the next
// sequence's (or past the tensor: zero-filled). The kernel masks keys >= sk and writes no row >= sq.
// Device-side indices are never trusted: lengths are clamped to the tensors' extents, as the
// portable kernels' KV operand does.
#pragma once

#include <cstdint>

namespace attnkit::gpu::sm90 {

struct SeqInfo {
  int q_offset;  // first row of the sequence in Q / O / LSE (0 unless ragged)
  int sq;        // its queries
  int q_batch;   // batch coordinate of Q / O / LSE (0 when ragged)
  int k_offset;  // first row in K / V (0 unless ragged)
  int sk;        // keys it uses
  int kv_batch;  // batch coordinate of K / V (0 when ragged)
};

struct SeqLens {
  int q_rows = 0;  // batched: Sq; ragged: total_q rows of the tensor
  int k_rows = 0;  // batched: Sk; ragged: total_k rows of the tensor
  const int32_t* cu_q = nullptr;
  int cu_q_stride = 1;  // element strides of the index tensors (the dispatcher keeps them < 2^31)
  const int32_t* cu_k = nullptr;
  int cu_k_stride = 1;
  const int32_t* used_k = nullptr;  // seqused_k (with batched K only)
  int used_k_stride = 1;

#if defined(__CUDACC__)
  // asm volatile: every lookup reloads (an L1 hit) instead of the compiler keeping the lengths
  // live from the tile's start through its KV loop, which has no registers to spare (they cost
  // 8 bytes of spills at d128).
  __device__ __forceinline__ static int load(const int32_t* ptr) {
    int v;
    asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(ptr));
    return v;
  }

  __device__ __forceinline__ SeqInfo get(int b) const {
    SeqInfo s{0, q_rows, b, 0, k_rows, b};
    if (cu_q != nullptr) {
      const int lo = min(max(load(cu_q + b * cu_q_stride), 0), q_rows);
      const int hi = min(max(load(cu_q + (b + 1) * cu_q_stride), lo), q_rows);
      s.q_offset = lo, s.sq = hi - lo, s.q_batch = 0;
    }
    if (cu_k != nullptr) {
      const int lo = min(max(load(cu_k + b * cu_k_stride), 0), k_rows);
      const int hi = min(max(load(cu_k + (b + 1) * cu_k_stride), lo), k_rows);
      s.k_offset = lo, s.sk = hi - lo, s.kv_batch = 0;
    } else if (used_k != nullptr) {
      s.sk = min(max(load(used_k + b * used_k_stride), 0), k_rows);
    }
    return s;
  }
#endif
};

}  // namespace attnkit::gpu::sm90
