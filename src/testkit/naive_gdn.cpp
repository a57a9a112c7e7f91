// Gated DeltaNet token by token in fp64, straight from the recurrence in gdn.h. Shares no code with
// the CPU backend beyond the dtype decoding of cpu/half.h.
#include <cmath>
#include <string>

#include "cpu/half.h"
#include "testkit/naive.h"

namespace attnkit::testkit {
namespace {

double at(const TensorView& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx) off += i * t.stride[d++];
  return ref::load_float(t, off);
}

}  // namespace

Status naive_gdn(const GdnChunkArgs& a, std::vector<double>* o, std::vector<double>* final_state) {
  if (a.q.ndim != 4 || a.k.ndim != 4 || a.v.ndim != 4 || a.g.ndim != 3 || a.beta.ndim != 3)
    return Status::Invalid("naive_gdn: q, k, v need 4 dims and g, beta 3");
  const int64_t B = a.q.shape[0], T = a.q.shape[1], H = a.q.shape[2], K = a.q.shape[3];
  const int64_t HV = a.v.shape[2], V = a.v.shape[3];
  if (H < 1 || HV % H != 0) return Status::Invalid("naive_gdn: HV must be a multiple of H");
  const double scale = a.scale != 0.f ? a.scale : 1.0 / std::sqrt(static_cast<double>(K));

  // Sequences as (batch entry, first row, length).
  std::vector<int64_t> seq_b, seq_t0, seq_len;
  if (a.cu_seqlens.defined()) {
    if (B != 1) return Status::Invalid("naive_gdn: cu_seqlens needs B = 1");
    const int32_t* cu = static_cast<const int32_t*>(a.cu_seqlens.data);
    for (int64_t n = 0; n + 1 < a.cu_seqlens.shape[0]; ++n) {
      const int64_t s = cu[n * a.cu_seqlens.stride[0]], e = cu[(n + 1) * a.cu_seqlens.stride[0]];
      if (s < 0 || e < s || e > T) return Status::Invalid("naive_gdn: bad cu_seqlens");
      seq_b.push_back(0);
      seq_t0.push_back(s);
      seq_len.push_back(e - s);
    }
  } else {
    for (int64_t b = 0; b < B; ++b) {
      seq_b.push_back(b);
      seq_t0.push_back(0);
      seq_len.push_back(T);
    }
  }
  const int64_t N = static_cast<int64_t>(seq_b.size());

  o->assign(static_cast<size_t>(B * T * HV * V), 0.0);
  final_state->assign(static_cast<size_t>(N * HV * K * V), 0.0);
  std::vector<double> S(K * V), q(K), k(K), vp(V);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / (HV / H);
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j)
          S[i * V + j] = a.initial_state.defined() ? at(a.initial_state, {n, hv, i, j}) : 0.0;
      for (int64_t s = 0; s < seq_len[n]; ++s) {
        const int64_t b = seq_b[n], t = seq_t0[n] + s;
        double qn = 0, kn = 0;
        for (int64_t i = 0; i < K; ++i) {
          q[i] = at(a.q, {b, t, h, i});
          k[i] = at(a.k, {b, t, h, i});
          qn += q[i] * q[i];
          kn += k[i] * k[i];
        }
        if (a.use_qk_l2norm) {
          for (int64_t i = 0; i < K; ++i) {
            q[i] /= std::sqrt(qn + 1e-6);
            k[i] /= std::sqrt(kn + 1e-6);
          }
        }
        const double decay = std::exp(at(a.g, {b, t, hv}));
        const double beta = at(a.beta, {b, t, hv});
        for (double& x : S) x *= decay;
        // v' = beta (v - S^T k)
        for (int64_t j = 0; j < V; ++j) {
          double sk = 0;
          for (int64_t i = 0; i < K; ++i) sk += S[i * V + j] * k[i];
          vp[j] = beta * (at(a.v, {b, t, hv, j}) - sk);
        }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[i * V + j] += k[i] * vp[j];
        // o = S^T (scale q)
        for (int64_t j = 0; j < V; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < K; ++i) acc += S[i * V + j] * scale * q[i];
          (*o)[((b * T + t) * HV + hv) * V + j] = acc;
        }
      }
      for (int64_t i = 0; i < K * V; ++i) (*final_state)[(n * HV + hv) * K * V + i] = S[i];
    }
  }
  return Status::Ok();
}

}  // namespace attnkit::testkit
