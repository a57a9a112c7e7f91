// The Gated DeltaNet decode step on the CPU: one token per sequence against its slot of the state
// pool, updated in place. Slots are distinct (validated), so the (sequence, value head) tasks never
// touch the same memory; a slot of -1 is a padding row (output 0).
#include <cmath>
#include <vector>

#include "api/gdn_backends.h"
#include "cpu/gdn_io.h"
#include "cpu/gdn_math.h"
#include "cpu/parallel.h"

namespace attnkit::detail {
namespace {

// Row `n`, head `head` of an [N, heads, D] tensor <-> buf[D].
void load_head(const TensorView& t, int64_t n, int64_t head, float* buf) {
  ref::gdn::load_span(t, n * t.stride[0] + head * t.stride[1], t.shape[2], buf);
}

}  // namespace

Status cpu_gdn_decode_step(const GdnDecodeArgs& a, const GdnDecodeProblem& p,
                           const ExecOptions& opts) {
  ref::parallel_for(p.N * p.HV, opts.cpu_threads, [&](int64_t task) {
    const int64_t n = task / p.HV, hv = task % p.HV, h = hv / p.group(), slot = p.slots[n];
    std::vector<float> S(p.K * p.V), q(p.K), k(p.K), v(p.V), o(p.V), scratch(p.V);
    if (slot == -1) {  // a padding row: no state, output 0
      ref::gdn::store_span(a.o, n * a.o.stride[0] + hv * a.o.stride[1], p.V, o.data());
      return;
    }
    load_head(a.q, n, h, q.data());
    load_head(a.k, n, h, k.data());
    if (p.use_qk_l2norm) {
      ref::gdn::l2_normalize(q.data(), 1, p.K);
      ref::gdn::l2_normalize(k.data(), 1, p.K);
    }
    load_head(a.v, n, hv, v.data());
    float g, beta;
    if (p.fused_gating) {  // gdn.h: the gates from the layer's parameters
      const float x = ref::load_float(a.a, n * a.a.stride[0] + hv * a.a.stride[1]) +
                      ref::load_float(a.dt_bias, hv * a.dt_bias.stride[0]);
      const float softplus = x > 20.f ? x : std::log1p(std::exp(x));
      g = -std::exp(ref::load_float(a.A_log, hv * a.A_log.stride[0])) * softplus;
      beta = 1.f / (1.f + std::exp(-ref::load_float(a.b, n * a.b.stride[0] + hv * a.b.stride[1])));
    } else {
      g = ref::load_float(a.g, n * a.g.stride[0] + hv * a.g.stride[1]);
      beta = ref::load_float(a.beta, n * a.beta.stride[0] + hv * a.beta.stride[1]);
    }
    ref::gdn::load_state(a.state_pool, slot, hv, S.data());
    ref::gdn::token_step(S.data(), q.data(), k.data(), v.data(), g, beta, p.scale, p.K, p.V,
                         o.data(), scratch.data());
    ref::gdn::store_state(a.state_pool, slot, hv, S.data());
    ref::gdn::store_span(a.o, n * a.o.stride[0] + hv * a.o.stride[1], p.V, o.data());
  });
  return Status::Ok();
}

}  // namespace attnkit::detail
