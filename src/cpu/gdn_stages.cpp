// The five stages of the chunked Gated DeltaNet pipeline as standalone CPU ops. Each gathers its
// slices into fp32 buffers, runs the chunk math of cpu/gdn_math.h and stores the result in the
// output view's dtype. Stages 1 and 4 run per (sequence, value head) -- stage 4 carries the state
// from chunk to chunk; stages 2, 3 and 5 per (chunk, value head).
#include <vector>

#include "api/gdn_backends.h"
#include "cpu/gdn_io.h"
#include "cpu/gdn_math.h"
#include "cpu/parallel.h"

namespace attnkit::detail {
namespace {

using namespace ref::gdn;
constexpr int64_t kC = kGdnChunk;

// Runs fn(loc, hv) for every (chunk, value head) in parallel.
template <typename Fn>
void for_each_chunk(const GdnProblem& p, const ExecOptions& opts, Fn fn) {
  ref::parallel_for(p.num_chunks * p.HV, opts.cpu_threads, [&](int64_t task) {
    fn(locate_chunk(p, task / p.HV), task % p.HV);
  });
}

}  // namespace

Status cpu_gdn_chunk_cumsum(const GdnCumsumArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  ref::parallel_for(p.N * p.HV, opts.cpu_threads, [&](int64_t task) {
    const int64_t n = task / p.HV, hv = task % p.HV, b = p.batch_of(n);
    float g[kC], gc[kC];
    for (int64_t t0 = 0; t0 < p.seq_len[n]; t0 += kC) {
      const int64_t L = std::min(kC, p.seq_len[n] - t0);
      load_tokens(a.g, b, p.seq_start[n] + t0, L, hv, g);
      chunk_cumsum(g, L, gc);
      store_tokens(a.g_cum, b, p.seq_start[n] + t0, L, hv, gc);
    }
  });
  return Status::Ok();
}

Status cpu_gdn_kkt_inverse(const GdnKktInverseArgs& a, const GdnProblem& p,
                           const ExecOptions& opts) {
  for_each_chunk(p, opts, [&](const ChunkLoc& c, int64_t hv) {
    std::vector<float> k(kC * p.K), a_inv(kC * kC);
    float beta[kC], gc[kC];
    load_rows(a.k, c.b, c.t0, c.len, hv / p.group(), k.data());
    load_tokens(a.beta, c.b, c.t0, c.len, hv, beta);
    load_tokens(a.g_cum, c.b, c.t0, c.len, hv, gc);
    kkt_inverse(k.data(), beta, gc, c.len, p.K, a_inv.data());
    store_rows(a.a_inv, c.b, c.t0, c.len, hv, a_inv.data());
  });
  return Status::Ok();
}

Status cpu_gdn_wu(const GdnWuArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  for_each_chunk(p, opts, [&](const ChunkLoc& c, int64_t hv) {
    std::vector<float> k(kC * p.K), v(kC * p.V), a_inv(kC * kC), w(kC * p.K), u(kC * p.V);
    float beta[kC], gc[kC];
    load_rows(a.k, c.b, c.t0, c.len, hv / p.group(), k.data());
    load_rows(a.v, c.b, c.t0, c.len, hv, v.data());
    load_rows(a.a_inv, c.b, c.t0, c.len, hv, a_inv.data());
    load_tokens(a.beta, c.b, c.t0, c.len, hv, beta);
    load_tokens(a.g_cum, c.b, c.t0, c.len, hv, gc);
    wu(a_inv.data(), k.data(), v.data(), beta, gc, c.len, p.K, p.V, w.data(), u.data());
    store_rows(a.w, c.b, c.t0, c.len, hv, w.data());
    store_rows(a.u, c.b, c.t0, c.len, hv, u.data());
  });
  return Status::Ok();
}

Status cpu_gdn_state_pass(const GdnStateArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  ref::parallel_for(p.N * p.HV, opts.cpu_threads, [&](int64_t task) {
    const int64_t n = task / p.HV, hv = task % p.HV, b = p.batch_of(n);
    std::vector<float> S(p.K * p.V, 0.f), k(kC * p.K), w(kC * p.K), u(kC * p.V), vn(kC * p.V);
    float gc[kC];
    if (p.has_initial_state) load_state(a.initial_state, n, hv, S.data());
    for (int64_t j = 0; j < p.chunks_of(n); ++j) {
      const int64_t t0 = p.seq_start[n] + j * kC;
      const int64_t L = std::min(kC, p.seq_len[n] - j * kC);
      // h keeps the entry state in its own dtype; the pass carries S on in fp32.
      store_state(a.h, p.chunk_offsets[n] + j, hv, S.data());
      load_rows(a.k, b, t0, L, hv / p.group(), k.data());
      load_rows(a.w, b, t0, L, hv, w.data());
      load_rows(a.u, b, t0, L, hv, u.data());
      load_tokens(a.g_cum, b, t0, L, hv, gc);
      chunk_v_new(w.data(), u.data(), S.data(), L, p.K, p.V, vn.data());
      store_rows(a.v_new, b, t0, L, hv, vn.data());
      chunk_state_update(k.data(), vn.data(), gc, L, p.K, p.V, S.data());
    }
    if (p.has_final_state) store_state(a.final_state, n, hv, S.data());
  });
  return Status::Ok();
}

Status cpu_gdn_chunk_output(const GdnOutputArgs& a, const GdnProblem& p,
                            const ExecOptions& opts) {
  for_each_chunk(p, opts, [&](const ChunkLoc& c, int64_t hv) {
    const int64_t h = hv / p.group();
    std::vector<float> q(kC * p.K), k(kC * p.K), vn(kC * p.V), S(p.K * p.V), o(kC * p.V);
    float gc[kC];
    load_rows(a.q, c.b, c.t0, c.len, h, q.data());
    load_rows(a.k, c.b, c.t0, c.len, h, k.data());
    load_rows(a.v_new, c.b, c.t0, c.len, hv, vn.data());
    load_state(a.h, c.index, hv, S.data());
    load_tokens(a.g_cum, c.b, c.t0, c.len, hv, gc);
    chunk_output(q.data(), k.data(), vn.data(), S.data(), gc, c.len, p.K, p.V, p.scale, o.data());
    store_rows(a.o, c.b, c.t0, c.len, hv, o.data());
  });
  return Status::Ok();
}

}  // namespace attnkit::detail
