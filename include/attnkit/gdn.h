// Gated DeltaNet (chunked linear attention with a delta-rule state), the semantics of
// flash-linear-attention's chunk_gated_delta_rule with a natural-log gate. Per value head the
// state S is K x V; per token t:
//   S <- exp(g_t) S;  v' = beta_t (v_t - S^T k_t);  S <- S + k_t v'^T;  o_t = S^T (scale q_t)
// q/k heads H, value heads HV, HV % H == 0: value head hv reads q/k head hv / (HV / H).
//
// Aliasing as in attention.h: outputs apart from inputs and each other; in place only where noted
// (final_state = initial_state; the decode step's state_pool).
//
// Layout: q, k [B, T, H, K]; v [B, T, HV, V]; g, beta [B, T, HV]. With cu_seqlens (int32 [N+1])
// the batch is ragged: B must be 1 and sequence n is tokens cu[n] .. cu[n+1]-1.
// Chunks (64 tokens) never straddle sequences. Per-chunk tensors (h) are indexed by a global
// chunk number: sequence n owns chunks chunk_offset(n) .. + ceil(len_n / 64) - 1.
#pragma once

#include "attnkit/options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

inline constexpr int kGdnChunk = 64;

struct GdnChunkArgs {
  TensorView q, k;        // [B, T, H, K], bf16 / fp16 (fp32 accepted by the CPU backend)
  TensorView v;           // [B, T, HV, V], same dtype as q
  TensorView g;           // [B, T, HV], fp32, log-space gate (<= 0)
  TensorView beta;        // [B, T, HV], fp32 or q's dtype
  TensorView cu_seqlens;  // optional int32 [N+1]
  TensorView initial_state;  // optional fp32 [N, HV, K, V] (N = B, or number of sequences)
  TensorView final_state;    // optional output, fp32 [N, HV, K, V]; may be initial_state itself
                             // (the same view: states updated in place), else apart from it
  // Optional int32 [N]: the states live in pools, as engines keep them: initial_state and
  // final_state are [P, HV, K, V] (any P, each), and sequence n reads initial_state[slot] and
  // writes final_state[slot], slot = state_indices[n]; -1 (padding) starts from zeros and writes
  // nothing. Slots other than -1 are distinct and inside both pools; on a CUDA device without
  // ExecOptions::validate_device_indices an out-of-range slot is treated as -1.
  TensorView state_indices;
  TensorView o;              // output [B, T, HV, V], q's dtype
  float scale = 0.f;         // 0 = K^-1/2
  bool use_qk_l2norm = false;  // L2-normalise q and k per head inside the op
};

Status gdn_chunk_forward(const GdnChunkArgs& args, const ExecOptions& opts = {});

// ---- The chunked pipeline's stages, each usable alone. Their q/k inputs are already normalised.
// Intermediates may be fp32 or bf16 (the output view's dtype decides); fp32 gives the most accuracy.

// 1. g_cum[t] = sum of g over the chunk's tokens up to and including t. [B, T, HV] fp32.
struct GdnCumsumArgs {
  TensorView g, cu_seqlens, g_cum;
};
Status gdn_chunk_cumsum(const GdnCumsumArgs& args, const ExecOptions& opts = {});

// 2. Per chunk: A = strict_lower(diag(beta) (K K^T (.) Gamma)), Gamma[i,j] = exp(g_cum[i]-g_cum[j]);
//    a_inv = (I + A)^-1, stored row-wise: a_inv[b, t, hv, c] = row (token t's position
//    within its chunk), column c of the chunk.
//    [B, T, HV, 64].
struct GdnKktInverseArgs {
  TensorView k, beta, g_cum, cu_seqlens, a_inv;
};
Status gdn_kkt_inverse(const GdnKktInverseArgs& args, const ExecOptions& opts = {});

// 3. WY form: w = a_inv diag(beta exp(g_cum)) K ([B, T, HV, K]); u = a_inv diag(beta) V ([B,T,HV,V]).
struct GdnWuArgs {
  TensorView k, v, beta, g_cum, a_inv, cu_seqlens, w, u;
};
Status gdn_wu(const GdnWuArgs& args, const ExecOptions& opts = {});

// 4. State pass: for chunk c with entry state S_c (h[c], [num_chunks, HV, K, V]),
//    v_new = u - w S_c; S_{c+1} = exp(g_last) S_c + K^T diag(exp(g_last - g_cum)) v_new.
struct GdnStateArgs {
  TensorView k, w, u, g_cum, cu_seqlens;
  TensorView initial_state;  // optional fp32 [N, HV, K, V]
  TensorView h;              // output [num_chunks, HV, K, V]
  TensorView v_new;          // output [B, T, HV, V]
  TensorView final_state;    // optional output fp32 [N, HV, K, V]; may be initial_state itself
};
Status gdn_state_pass(const GdnStateArgs& args, const ExecOptions& opts = {});

// 5. Chunk output: O = scale (exp(g_cum) (.) (Q S_c) + tril(Q K^T (.) Gamma) v_new).
struct GdnOutputArgs {
  TensorView q, k, v_new, h, g_cum, cu_seqlens, o;
  float scale = 0.f;
};
Status gdn_chunk_output(const GdnOutputArgs& args, const ExecOptions& opts = {});

// Number of 64-token chunks in the batch (the first dim of h).
Status gdn_num_chunks(const TensorView& q, const TensorView& cu_seqlens, int64_t* num_chunks);

// ---- Decode: new tokens per sequence against a pool of states, updated in place.
// One token per sequence (q [N, H, K]), or T tokens per sequence (q [N, T, H, K]: speculative
// verification), run in order: state_pool[slot] goes through token 0, 1, .., T-1 of sequence n.
// The shapes below are the one-token ones; with T tokens every per-token tensor gains T as its
// second dimension (v [N, T, HV, V], g / beta / a / b [N, T, HV], o [N, T, HV, V]).
struct GdnDecodeArgs {
  TensorView q, k;           // [N, H, K] or [N, T, H, K]
  TensorView v;              // [N, HV, V]
  TensorView g, beta;        // [N, HV]; g fp32, beta fp32 or q's dtype (or the fused gating below)
  TensorView state_pool;     // fp32 [P, HV, K, V], read and written in place; apart from the rest
  // int32 [N]: which pool slot sequence n uses (distinct slots), or -1: a padding row (CUDA graphs
  // pad batches), skipped: no state read or written, its o row set to 0. On a CUDA device without
  // ExecOptions::validate_device_indices any slot outside [0, P) is skipped the same way.
  TensorView state_indices;
  TensorView o;              // [N, HV, V], q's dtype
  float scale = 0.f;
  bool use_qk_l2norm = false;
  // Fused gating, as vLLM's and SGLang's decode compute it, given instead of g and beta (all four,
  // and then no g / beta): the gates from the layer's parameters,
  //   g[n, hv] = -exp(A_log[hv]) * softplus(a[n, hv] + dt_bias[hv]),
  //   beta[n, hv] = sigmoid(b[n, hv]),
  // softplus(x) = log(1 + exp(x)), taken as x above 20. A_log, dt_bias: fp32 [HV]; a, b: [N, HV],
  // both fp32 or both q's dtype.
  TensorView A_log, a, dt_bias, b;
  // Optional output, fp32 [N, T, HV, K, V] (T = 1 for one-token q), any strides with the last two
  // dims as the pool allows (key-last passed transposed): the state after each token,
  // step_states[n, t] = S after token t, so that an engine can keep the state of the accepted
  // prefix of speculative tokens. Rows of padding sequences are not written.
  TensorView step_states;
  // false: state_pool is read and left unchanged (the engine commits a step of step_states).
  bool update_pool = true;
};
Status gdn_decode_step(const GdnDecodeArgs& args, const ExecOptions& opts = {});

// Token-by-token recurrent form of the whole forward (CPU reference only): the definition above,
// evaluated directly. Same arguments as gdn_chunk_forward.
Status gdn_recurrent_forward(const GdnChunkArgs& args, const ExecOptions& opts = {});

}  // namespace attnkit
