// The Gated DeltaNet decode step on the CPU: T new tokens per sequence (T = 1 for one-token q)
// against its slot of the state pool, run in order, the pool updated in place. Slots are distinct
// (validated), so the (sequence, value head) tasks never touch the same memory; a slot of -1 is a
// padding row (output 0, no state read or written).
#include <cmath>
#include <vector>

#include "api/gdn_backends.h"
#include "cpu/gdn_io.h"
#include "cpu/gdn_math.h"
#include "cpu/parallel.h"

namespace attnkit::detail {
namespace {

// Element offset of (sequence n, token t, head) in a per-token tensor: [N, heads, ...] or
// [N, T, heads, ...].
int64_t tok_offset(const TensorView& x, const GdnDecodeProblem& p, int64_t n, int64_t t,
                   int64_t head) {
  return p.multi_token ? n * x.stride[0] + t * x.stride[1] + head * x.stride[2]
                       : n * x.stride[0] + head * x.stride[1];
}

void load_head(const TensorView& x, const GdnDecodeProblem& p, int64_t n, int64_t t, int64_t head,
               float* buf) {
  ref::gdn::load_span(x, tok_offset(x, p, n, t, head), x.size(-1), buf);
}

float load_gate(const TensorView& x, const GdnDecodeProblem& p, int64_t n, int64_t t, int64_t hv) {
  return ref::load_float(x, tok_offset(x, p, n, t, hv));
}

// Token t's (g, beta): read, or from the layer's parameters under fused gating (gdn.h).
void gates(const GdnDecodeArgs& a, const GdnDecodeProblem& p, int64_t n, int64_t t, int64_t hv,
           float* g, float* beta) {
  if (!p.fused_gating) {
    *g = load_gate(a.g, p, n, t, hv);
    *beta = load_gate(a.beta, p, n, t, hv);
    return;
  }
  const float x =
      load_gate(a.a, p, n, t, hv) + ref::load_float(a.dt_bias, hv * a.dt_bias.stride[0]);
  const float softplus = x > 20.f ? x : std::log1p(std::exp(x));
  *g = -std::exp(ref::load_float(a.A_log, hv * a.A_log.stride[0])) * softplus;
  *beta = 1.f / (1.f + std::exp(-load_gate(a.b, p, n, t, hv)));
}

// step_states[n] as a [T, HV, K, V] view (store_state's layout).
TensorView steps_of(const TensorView& steps, int64_t n) {
  TensorView v = steps;
  v.data = static_cast<float*>(steps.data) + n * steps.stride[0];
  v.ndim = 4;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = steps.shape[i + 1];
    v.stride[i] = steps.stride[i + 1];
  }
  return v;
}

}  // namespace

Status cpu_gdn_decode_step(const GdnDecodeArgs& a, const GdnDecodeProblem& p,
                           const ExecOptions& opts) {
  ref::parallel_for(p.N * p.HV, opts.cpu_threads, [&](int64_t task) {
    const int64_t n = task / p.HV, hv = task % p.HV, h = hv / p.group(), slot = p.slots[n];
    std::vector<float> S(p.K * p.V), q(p.K), k(p.K), v(p.V), o(p.V), scratch(p.V);
    if (slot == -1) {  // a padding row: no state, output 0
      for (int64_t t = 0; t < p.T; ++t)
        ref::gdn::store_span(a.o, tok_offset(a.o, p, n, t, hv), p.V, o.data());
      return;
    }
    ref::gdn::load_state(a.state_pool, slot, hv, S.data());
    for (int64_t t = 0; t < p.T; ++t) {
      load_head(a.q, p, n, t, h, q.data());
      load_head(a.k, p, n, t, h, k.data());
      if (p.use_qk_l2norm) {
        ref::gdn::l2_normalize(q.data(), 1, p.K);
        ref::gdn::l2_normalize(k.data(), 1, p.K);
      }
      load_head(a.v, p, n, t, hv, v.data());
      float g, beta;
      gates(a, p, n, t, hv, &g, &beta);
      ref::gdn::token_step(S.data(), q.data(), k.data(), v.data(), g, beta, p.scale, p.K, p.V,
                           o.data(), scratch.data());
      ref::gdn::store_span(a.o, tok_offset(a.o, p, n, t, hv), p.V, o.data());
      if (a.step_states.defined())
        ref::gdn::store_state(steps_of(a.step_states, n), t, hv, S.data());
    }
    if (p.update_pool) ref::gdn::store_state(a.state_pool, slot, hv, S.data());
  });
  return Status::Ok();
}

}  // namespace attnkit::detail
