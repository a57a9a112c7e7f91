// Runs a small causal attention on the CPU through the installed library and checks one row by hand.
#include <attnkit/attnkit.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  using namespace attnkit;
  const int S = 4, H = 2, D = 64;
  std::vector<float> q(S * H * D), k(S * H * D), v(S * H * D), o(S * H * D, NAN);
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = std::sin(0.37f * i);
    k[i] = std::cos(0.11f * i);
    v[i] = std::sin(0.05f * i + 1.f);
  }
  AttentionArgs a;
  a.q = make_view(q.data(), DType::kFloat32, {1, S, H, D});
  a.k = make_view(k.data(), DType::kFloat32, {1, S, H, D});
  a.v = make_view(v.data(), DType::kFloat32, {1, S, H, D});
  a.o = make_view(o.data(), DType::kFloat32, {1, S, H, D});
  a.mask = Mask::causal();
  Status st = attention_forward(a);
  if (!st.ok()) {
    std::printf("attention_forward failed: %s\n", st.message().c_str());
    return 1;
  }
  // Row 0 sees only key 0, so its output is v[0] exactly.
  for (int d = 0; d < D; ++d)
    if (std::fabs(o[d] - v[d]) > 1e-5f) {
      std::printf("mismatch at %d: %f vs %f\n", d, o[d], v[d]);
      return 1;
    }
  std::printf("attnkit %s consumer: ok\n", version());
  return 0;
}
