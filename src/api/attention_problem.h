// The validated, normalised description of one attention_forward call. Validation builds it once;
// every backend reads it instead of re-deriving shapes from the views.
#pragma once

#include <cstdint>
#include <vector>

#include "api/kv_scale.h"
#include "attnkit/attention.h"

namespace attnkit::detail {

enum class KvLayout { kContiguous, kRagged, kPaged };

struct AttnProblem {
  int batch = 0;
  int hq = 0, hkv = 0, dqk = 0, dv = 0;
  DType dtype = DType::kBFloat16;
  Device device{};

  bool q_ragged = false;
  int64_t q_rows = 0;  // batched: Sq; ragged: total_q
  KvLayout kv = KvLayout::kContiguous;
  int64_t k_rows = 0;  // contiguous: Sk; ragged: total_k; paged: page_size
  int64_t num_pages = 0, max_pages = 0;  // paged only
  bool has_seqused_k = false;
  // e4m3 K / V with their scales (O keeps `dtype`); e4m3 Q too with q_fp8 (FP8 attention).
  bool kv_fp8 = false, q_fp8 = false;
  KvScaleKind k_scale = KvScaleKind::kNone, v_scale = KvScaleKind::kNone;
  KvScaleKind q_scale = KvScaleKind::kNone;
  // fp32 O under fp16 / bf16 Q: partial outputs kept exact for a later merge_states (CPU only).
  bool o_fp32 = false;

  // Upper bounds when index tensors live on the device and were not read (exact otherwise).
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;

  float scale = 0.f;  // resolved (never 0)
  Mask mask{};
  float softcap = 0.f;
  bool has_alibi = false, has_sinks = false, has_lse = false;

  // Host copies of the index tensors, present when they were host-visible or validated.
  bool indices_on_host = false;
  std::vector<int32_t> cu_q, cu_k, seqused_k, page_table;

  int64_t page_size() const { return k_rows; }
  // Only valid with indices_on_host.
  int64_t seqlen_q(int b) const { return q_ragged ? cu_q[b + 1] - cu_q[b] : q_rows; }
  int64_t seqlen_k(int b) const {
    if (has_seqused_k) return seqused_k[b];
    return kv == KvLayout::kRagged ? cu_k[b + 1] - cu_k[b] : k_rows;
  }
  int64_t q_start(int b) const { return q_ragged ? cu_q[b] : 0; }
  int64_t k_start(int b) const { return kv == KvLayout::kRagged ? cu_k[b] : 0; }
  bool is_decode() const { return max_seqlen_q <= 16; }
};

Status validate_attention(const AttentionArgs& args, const ExecOptions& opts, AttnProblem* prob);

struct MergeProblem {
  int64_t n = 0, t = 0, h = 0, d = 0;
  Device device{};
};
Status validate_merge_states(const MergeStatesArgs& args, MergeProblem* prob);

}  // namespace attnkit::detail
