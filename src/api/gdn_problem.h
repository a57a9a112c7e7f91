// The validated, normalised description of one Gated DeltaNet call. Validation builds it once; every
// backend reads it instead of re-deriving shapes from the views.
//
// Token tensors are [B, T, ...]. A sequence n is rows seq_start[n] .. seq_start[n] + seq_len[n] - 1
// of batch entry batch_of(n): without cu_seqlens N = B and every sequence is a whole batch entry;
// with cu_seqlens B = 1 and the rows come from cu_seqlens. Rows past cu_seqlens[N] belong to no
// sequence: no op reads or writes them.
#pragma once

#include <cstdint>
#include <vector>

#include "attnkit/gdn.h"

namespace attnkit::detail {

// The CPU backend serves any head size up to this; the GPU kernels target K = V = kGdnGpuHeadDim.
inline constexpr int64_t kGdnCpuMaxHeadDim = 256;
inline constexpr int64_t kGdnGpuHeadDim = 128;

struct GdnProblem {
  int64_t B = 0, T = 0;    // leading dims of the token tensors
  int64_t H = 0, HV = 0;   // q/k heads, value heads; HV % H == 0
  int64_t K = 0, V = 0;    // key / value head sizes (0 where the op has no such tensor)
  int64_t N = 0;           // sequences
  bool varlen = false;     // cu_seqlens given
  DType dtype = DType::kBFloat16;  // of the token inputs (q / k / v)
  Device device{};
  float scale = 0.f;       // resolved (never 0) for ops that read q; 0 otherwise
  bool use_qk_l2norm = false;
  bool has_initial_state = false, has_final_state = false;
  // state_indices given: the states are pool rows. slots holds them (host-read, checked) unless
  // they are on a CUDA device and unread.
  bool state_slots = false;
  std::vector<int32_t> slots;
  // Pool row of sequence n's states (n itself without state_indices); -1: none.
  int64_t state_row(int64_t n) const { return state_slots ? slots[n] : n; }

  // Host copies of the sequence layout. Present unless cu_seqlens is on a CUDA device and was not
  // read (ExecOptions::validate_device_indices unset): then indices_on_host is false, the vectors
  // are empty and num_chunks is h's first dim when the op has an h, else -1.
  bool indices_on_host = false;
  std::vector<int32_t> cu_seqlens;     // [N + 1], varlen only
  std::vector<int64_t> seq_start;      // [N] first row of sequence n in its batch entry
  std::vector<int64_t> seq_len;        // [N]
  std::vector<int64_t> chunk_offsets;  // [N + 1] first global chunk of sequence n; back() = total
  int64_t num_chunks = 0;              // total 64-token chunks (first dim of h)

  int64_t group() const { return HV / H; }  // value heads per q/k head
  int64_t batch_of(int64_t n) const { return varlen ? 0 : n; }
  int64_t chunks_of(int64_t n) const { return chunk_offsets[n + 1] - chunk_offsets[n]; }
};

Status validate_gdn_chunk(const GdnChunkArgs& args, const ExecOptions& opts, GdnProblem* prob);
Status validate_gdn_cumsum(const GdnCumsumArgs& args, const ExecOptions& opts, GdnProblem* prob);
Status validate_gdn_kkt_inverse(const GdnKktInverseArgs& args, const ExecOptions& opts,
                                GdnProblem* prob);
Status validate_gdn_wu(const GdnWuArgs& args, const ExecOptions& opts, GdnProblem* prob);
Status validate_gdn_state_pass(const GdnStateArgs& args, const ExecOptions& opts, GdnProblem* prob);
Status validate_gdn_output(const GdnOutputArgs& args, const ExecOptions& opts, GdnProblem* prob);

struct GdnDecodeProblem {
  int64_t N = 0;           // sequences
  int64_t T = 1;           // new tokens per sequence
  bool multi_token = false;  // q [N, T, H, K] (per-token tensors carry T as dim 1)
  bool update_pool = true;
  int64_t H = 0, HV = 0, K = 0, V = 0;
  int64_t P = 0;           // state pool slots
  DType dtype = DType::kBFloat16;
  Device device{};
  float scale = 0.f;       // resolved (never 0)
  bool use_qk_l2norm = false;
  bool fused_gating = false;  // gates from A_log, a, dt_bias, b (gdn.h) instead of g, beta
  // Host copy of state_indices, checked in [0, P) and distinct; empty (and indices_on_host false)
  // when they are on a CUDA device and were not read.
  bool indices_on_host = false;
  std::vector<int32_t> slots;

  int64_t group() const { return HV / H; }
};

Status validate_gdn_decode(const GdnDecodeArgs& args, const ExecOptions& opts,
                           GdnDecodeProblem* prob);

// gdn_num_chunks' validation and count (reads cu_seqlens, synchronising the default stream when it
// is on a CUDA device).
Status count_gdn_chunks(const TensorView& q, const TensorView& cu_seqlens, int64_t* num_chunks);

}  // namespace attnkit::detail
