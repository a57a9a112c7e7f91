// EXPERIMENT (temporary, not for merge)
#include <cstring>
#include "cuda/instantiations/sm90_exp.h"
namespace attnkit::gpu {
Sm90ExpFn sm90_exp_find(const char* name, int d, const char* policies) {
  struct Row { const char* n; int d; const char* pol; Sm90ExpFn fn; };
  static const Row rows[] = {
    {"oldepi", 128, "none", &sm90_exp_oldepi_d128_none},
    {"oldepi", 256, "none", &sm90_exp_oldepi_d256_none},
    {"rsearly", 128, "none", &sm90_exp_rsearly_d128_none},
    {"rsearly", 256, "none", &sm90_exp_rsearly_d256_none},
    {"n80", 256, "none", &sm90_exp_n80_d256_none},
    {"st2", 128, "none", &sm90_exp_st2_d128_none},
    {"w3n64", 128, "none", &sm90_exp_w3n64_d128_none},
    {"kv", 64, "none", &sm90_exp_kv_d64_none},
    {"kv", 128, "none", &sm90_exp_kv_d128_none},
    {"kv", 128, "causal", &sm90_exp_kv_d128_causal},
    {"kv", 256, "none", &sm90_exp_kv_d256_none},
    {"kv", 256, "causal", &sm90_exp_kv_d256_causal},
    {"n80kv", 256, "none", &sm90_exp_n80kv_d256_none},
    {"kvrs", 128, "none", &sm90_exp_kvrs_d128_none},
  };
  for (const Row& r : rows)
    if (std::strcmp(r.n, name) == 0 && r.d == d && std::strcmp(r.pol, policies) == 0) return r.fn;
  return nullptr;
}
}  // namespace attnkit::gpu
