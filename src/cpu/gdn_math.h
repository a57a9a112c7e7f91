// The Gated DeltaNet math of one chunk (<= 64 tokens of one value head) on contiguous fp32 buffers,
// shared by the stage ops, the fused chunked forward, the recurrent form and the decode step.
// Row-major: k, q, w [L x K]; v, u, v_new, o [L x V]; a_inv [L x 64]; S [K x V]; g, beta [L].
#pragma once

#include <cstdint>

namespace attnkit::ref::gdn {

// x / sqrt(sum x^2 + 1e-6) for each of `rows` rows of length D (flash-linear-attention's l2norm).
void l2_normalize(float* x, int64_t rows, int64_t D);

// Stage 1: g_cum[i] = g[0] + ... + g[i].
void chunk_cumsum(const float* g, int64_t L, float* g_cum);

// Stage 2: a_inv = (I + A)^-1 with A = strict_lower(diag(beta) (K K^T (.) Gamma)); the triangular
// solve runs in fp64. Writes all 64 columns of each of the L rows (zeros right of the diagonal).
void kkt_inverse(const float* k, const float* beta, const float* g_cum, int64_t L, int64_t K,
                 float* a_inv);

// Stage 3: w = a_inv diag(beta exp(g_cum)) k; u = a_inv diag(beta) v (columns 0 .. L-1 of a_inv).
void wu(const float* a_inv, const float* k, const float* v, const float* beta, const float* g_cum,
        int64_t L, int64_t K, int64_t V, float* w, float* u);

// Stage 4, first half: v_new = u - w S.
void chunk_v_new(const float* w, const float* u, const float* S, int64_t L, int64_t K, int64_t V,
                 float* v_new);
// Stage 4, second half: S <- exp(g_last) S + k^T diag(exp(g_last - g_cum)) v_new.
void chunk_state_update(const float* k, const float* v_new, const float* g_cum, int64_t L,
                        int64_t K, int64_t V, float* S);

// Stage 5: o = scale (exp(g_cum) (.) (q S) + tril(q k^T (.) Gamma) v_new), S the chunk's entry state.
void chunk_output(const float* q, const float* k, const float* v_new, const float* S,
                  const float* g_cum, int64_t L, int64_t K, int64_t V, float scale, float* o);

// One token of the recurrence on S: S <- exp(g) S; v' = beta (v - S^T k); S <- S + k v'^T;
// o = S^T (scale q). scratch holds V floats.
void token_step(float* S, const float* q, const float* k, const float* v, float g, float beta,
                float scale, int64_t K, int64_t V, float* o, float* scratch);

}  // namespace attnkit::ref::gdn
