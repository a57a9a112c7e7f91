// Softmax attention: attention_forward (prefill and decode; contiguous, ragged and paged KV) and
// merge_states (combining partial results, e.g. split-KV or ring attention).
//
// Aliasing (every op of the library): an output shares no memory with an input or another output,
// and no two elements of an output share an address; no call runs in place unless its header says
// so. Validation refuses, naming both tensors, what it can see: dense views whose address ranges
// meet, the same view twice, an output dimension of stride 0. Strided views whose ranges
// interleave without sharing an element (column slices of one fused buffer) are accepted.
#pragma once

#include <cstddef>
#include <string>

#include "attnkit/options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

// Every mask is a window around the bottom-right-aligned diagonal, optionally intersected with
// chunks. Query row i of a sequence with Sq queries and Sk keys sits at position p = i + Sk - Sq;
// key j is visible when
//   (window_left  < 0 || j >= p - window_left) &&
//   (window_right < 0 || j <= p + window_right) &&
//   (chunk_size  == 0 || floor(j / chunk_size) == floor(p / chunk_size))
// (floor division: with Sq > Sk the first rows have p < 0 and see no key of any chunk).
// A row that sees no key gets O = 0 and LSE = -inf. The factories below name the common cases.
struct Mask {
  int window_left = -1;
  int window_right = -1;
  int chunk_size = 0;

  static Mask none() { return {}; }
  static Mask causal() { return {-1, 0, 0}; }
  static Mask sliding_window(int left, int right) { return {left, right, 0}; }
  // Query and key in the same block of `size` positions (add `causal` for Llama-4 style).
  static Mask chunked(int size, bool causal = false) { return {-1, causal ? 0 : -1, size}; }

  bool is_none() const { return window_left < 0 && window_right < 0 && chunk_size == 0; }
};

struct AttentionArgs {
  // Q: [B, Sq, Hq, Dqk], or ragged [total_q, Hq, Dqk] with cu_seqlens_q [B+1] (int32).
  TensorView q;
  // K: [B, Sk, Hkv, Dqk] contiguous, ragged [total_k, Hkv, Dqk] with cu_seqlens_k [B+1], or a paged
  // cache [num_pages, page_size, Hkv, Dqk] with page_table [B, max_pages] and seqused_k [B].
  // V: the same with Dv in place of Dqk. Head dims 32, 64, 96, 128, 192, 256 each, or Dqk 576
  // with Dv 512: multi-head latent attention (DeepSeek-V3, Kimi-K2), K the latent cache
  // [.., 1, 576] (512 latent values, then 64 rope values) and V its first 512 values, passed as a
  // view of the same cache (CPU backend only for now).
  TensorView k, v;
  // FP8 (e4m3) inputs with fp32 scales: the values are q_scale * Q, k_scale * K, v_scale * V.
  //   - e4m3 K and V under fp16 / bf16 Q: a quantised KV cache (O has Q's dtype);
  //   - e4m3 Q, K and V: FP8 attention; O is fp16 or bf16 (its dtype is the call's).
  // Each scale is given exactly with its e4m3 tensor: per tensor [1], per head of the tensor
  // ([Hq] for Q, [Hkv] for K / V), per (token, head) shaped like the tensor without its last
  // dimension, or per (sequence, KV head) [B, Hkv] (FlashAttention-3's descales: query head h
  // reads entry [b, h / (Hq / Hkv)]). A 2-D scale of a ragged tensor that is also its per-token
  // shape is read per token.
  // CUDA: the decode kernel reads FP8 K / V with per-tensor, per-head and per-token scales; it
  // computes in fp16 (bf16 queries scaled by a power of two to fit), so per-token V scales must
  // stay below 65504. FP8 Q and [B, Hkv] scales run on the CPU backend only for now.
  TensorView q_scale, k_scale, v_scale;
  TensorView cu_seqlens_q;  // optional, int32 [B+1]
  TensorView cu_seqlens_k;  // optional, int32 [B+1]
  TensorView page_table;    // optional, int32 [B, max_pages]
  // int32 [B]: keys used per sequence. Required with page_table; optional with contiguous KV
  // (a KV cache allocated for Sk keys of which seqused_k[b] are filled).
  TensorView seqused_k;
  // Longest query / key sequence. Needed only for ragged or paged inputs whose index tensors live
  // on a CUDA device (the host does not read them); 0 = derive from host-visible indices.
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;

  // Outputs. O: Q's layout with Dv as last dim, Q's dtype (fp16 / bf16 Q: or fp32, partial outputs
  // kept exact for merge_states; CPU backend only for now). LSE (optional, fp32, natural log of
  // the softmax denominator, sinks included): [B, Sq, Hq] or ragged [total_q, Hq]; any strides.
  TensorView o;
  TensorView lse;

  float scale = 0.f;  // 0 = 1/sqrt(Dqk)
  Mask mask{};
  float softcap = 0.f;       // > 0: s <- cap * tanh(s / cap), on the scaled score
  TensorView alibi_slopes;   // optional fp32 [Hq]: s <- s - slope[h] * |p - j|, after softcap
  TensorView sinks;          // optional fp32 [Hq]: a logit added to the denominator only
  // split-KV: 0 = the library decides, 1 = no split, n > 1 = n splits, capped where the kernel
  // supports fewer (the portable combine merges at most 128; grid limits). Results agree across
  // split counts within the op's tolerance. AttentionPlan::num_splits says what runs.
  int num_splits = 0;
};

// What a call will run: computed once on the host, reusable across calls with the same shapes
// (and under CUDA graph capture).
struct AttentionPlan {
  Backend backend = Backend::kAuto;
  std::string kernel;  // human-readable name of the kernel chosen
  int num_splits = 1;
  size_t workspace_bytes = 0;
};

Status plan_attention(const AttentionArgs& args, const ExecOptions& opts, AttentionPlan* plan);

// Runs attention. With `plan` from plan_attention for the same shapes, no planning is redone.
Status attention_forward(const AttentionArgs& args, const ExecOptions& opts = {},
                         const AttentionPlan* plan = nullptr);

// Merges N partial attention states over the same queries:
//   LSE = log(sum_n exp(LSE_n)),  O = sum_n exp(LSE_n - LSE) * O_n.
// A state with LSE = -inf contributes nothing; if all are empty, O = 0 and LSE = -inf.
struct MergeStatesArgs {
  TensorView o_parts;    // [N, T, H, D], fp32 / fp16 / bf16
  TensorView lse_parts;  // [N, T, H], fp32
  TensorView o;          // [T, H, D], fp32 / fp16 / bf16
  TensorView lse;        // optional [T, H], fp32
};

Status merge_states(const MergeStatesArgs& args, const ExecOptions& opts = {});

}  // namespace attnkit
