// The whole Gated DeltaNet forward on the CPU, two ways:
//  - chunked: the five stages of cpu/gdn_math.h chunk after chunk with fp32 intermediates. Each
//    (sequence, value head) is one task that keeps its state in fp32 from chunk to chunk, so the
//    result equals running the stage ops in turn with fp32 intermediate tensors;
//  - recurrent: the per-token definition, evaluated directly.
#include <vector>

#include "api/gdn_backends.h"
#include "cpu/gdn_io.h"
#include "cpu/gdn_math.h"
#include "cpu/parallel.h"

namespace attnkit::detail {
namespace {

using namespace ref::gdn;
constexpr int64_t kC = kGdnChunk;

// q and k rows of one q/k head, L2-normalised when the op asks for it.
void load_qk(const GdnChunkArgs& a, const GdnProblem& p, int64_t b, int64_t t0, int64_t L,
             int64_t h, float* q, float* k) {
  load_rows(a.q, b, t0, L, h, q);
  load_rows(a.k, b, t0, L, h, k);
  if (p.use_qk_l2norm) {
    l2_normalize(q, L, p.K);
    l2_normalize(k, L, p.K);
  }
}

}  // namespace

Status cpu_gdn_chunk_forward(const GdnChunkArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  ref::parallel_for(p.N * p.HV, opts.cpu_threads, [&](int64_t task) {
    const int64_t n = task / p.HV, hv = task % p.HV, b = p.batch_of(n), h = hv / p.group();
    const int64_t K = p.K, V = p.V;
    std::vector<float> S(K * V, 0.f), q(kC * K), k(kC * K), v(kC * V), a_inv(kC * kC), w(kC * K),
        u(kC * V), vn(kC * V), o(kC * V);
    float g[kC], gc[kC], beta[kC];
    const int64_t row = p.state_row(n);  // -1: padding, no state read or written
    if (p.has_initial_state && row >= 0) load_state(a.initial_state, row, hv, S.data());
    for (int64_t j = 0; j < p.chunks_of(n); ++j) {
      const int64_t t0 = p.seq_start[n] + j * kC;
      const int64_t L = std::min(kC, p.seq_len[n] - j * kC);
      load_qk(a, p, b, t0, L, h, q.data(), k.data());
      load_rows(a.v, b, t0, L, hv, v.data());
      load_tokens(a.g, b, t0, L, hv, g);
      load_tokens(a.beta, b, t0, L, hv, beta);
      chunk_cumsum(g, L, gc);
      kkt_inverse(k.data(), beta, gc, L, K, a_inv.data());
      wu(a_inv.data(), k.data(), v.data(), beta, gc, L, K, V, w.data(), u.data());
      chunk_v_new(w.data(), u.data(), S.data(), L, K, V, vn.data());
      chunk_output(q.data(), k.data(), vn.data(), S.data(), gc, L, K, V, p.scale, o.data());
      store_rows(a.o, b, t0, L, hv, o.data());
      chunk_state_update(k.data(), vn.data(), gc, L, K, V, S.data());
    }
    // Written last, so final_state may be the same memory as initial_state.
    if (p.has_final_state && row >= 0) store_state(a.final_state, row, hv, S.data());
  });
  return Status::Ok();
}

Status cpu_gdn_recurrent_forward(const GdnChunkArgs& a, const GdnProblem& p,
                                 const ExecOptions& opts) {
  ref::parallel_for(p.N * p.HV, opts.cpu_threads, [&](int64_t task) {
    const int64_t n = task / p.HV, hv = task % p.HV, b = p.batch_of(n), h = hv / p.group();
    const int64_t K = p.K, V = p.V;
    std::vector<float> S(K * V, 0.f), q(K), k(K), v(V), o(V), scratch(V);
    const int64_t row = p.state_row(n);  // -1: padding, no state read or written
    if (p.has_initial_state && row >= 0) load_state(a.initial_state, row, hv, S.data());
    for (int64_t i = 0; i < p.seq_len[n]; ++i) {
      const int64_t t = p.seq_start[n] + i;
      float g, beta;
      load_qk(a, p, b, t, 1, h, q.data(), k.data());
      load_rows(a.v, b, t, 1, hv, v.data());
      load_tokens(a.g, b, t, 1, hv, &g);
      load_tokens(a.beta, b, t, 1, hv, &beta);
      token_step(S.data(), q.data(), k.data(), v.data(), g, beta, p.scale, K, V, o.data(),
                 scratch.data());
      store_rows(a.o, b, t, 1, hv, o.data());
    }
    if (p.has_final_state && row >= 0) store_state(a.final_state, row, hv, S.data());
  });
  return Status::Ok();
}

}  // namespace attnkit::detail
