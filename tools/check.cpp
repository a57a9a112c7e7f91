// `attnkit check`: runs one op (or the edge-shape list) and compares it with a reference: a GPU
// backend against the CPU backend, or the CPU backend against the naive fp64 loops of
// testkit/naive.h. Outputs are poisoned (NaN) first, so an unwritten element shows up as a NaN.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "api/gdn_backends.h"
#include "cases.h"
#include "commands.h"
#include "edge_shapes.h"
#include "flags.h"
#include "gpu.h"
#include "table.h"
#include "testkit/compare.h"
#include "testkit/naive.h"

namespace attnkit::cli {
namespace {

using testkit::ErrorStats;
using testkit::Tolerance;

// fp32 has no docs/design.md bound (GPU kernels take bf16/fp16); this one fits fp32 accumulation
// against fp64 for the small shapes a check uses.
constexpr Tolerance kAttnFp32{1e-5, 1e-4};
constexpr Tolerance kExact{0, 0};

Tolerance float_tol(DType dt) {
  switch (dt) {
    case DType::kBFloat16: return testkit::kAttnBf16;
    case DType::kFloat16: return testkit::kAttnFp16;
    default: return kAttnFp32;
  }
}

struct Mode {
  bool naive = false;  // test: the CPU backend; reference: naive fp64 loops
  Device dev = cpu();  // where the op under test runs
  Backend backend = Backend::kAuto;
  int threads = 0;
  detail::GdnKernels gdn_kernels;  // --gdn-kernels: Gated DeltaNet CUDA kernels forced
  std::string note;  // why this mode was chosen, when it was not asked for
  std::string describe() const {
    if (naive) return "cpu backend vs naive fp64 loop (testkit/naive.h)";
    return std::string(to_string(backend)) + " on cuda:" + std::to_string(dev.index) +
           " vs cpu backend";
  }
};

struct Metric {
  std::string name;
  ErrorStats e;
  Tolerance tol{};
  bool abs_only = false;  // LSE: docs/design.md bounds its absolute error only
  int64_t ref_nan = 0;
  bool ok = false;
};

struct Outcome {
  Status status;      // an error from the op, the reference or the set-up
  std::string where;  // which of them
  std::string kernel;
  std::vector<Metric> metrics;
  bool pass() const {
    if (!status.ok()) return false;
    for (const auto& m : metrics)
      if (!m.ok) return false;
    return !metrics.empty();
  }
};

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

Metric measure(const std::string& name, const std::vector<float>& out,
               const std::vector<float>& ref, Tolerance tol, bool abs_only = false) {
  Metric m;
  m.name = name;
  m.tol = tol;
  m.abs_only = abs_only;
  m.e = testkit::compare(out, ref);
  for (float r : ref) m.ref_nan += std::isnan(r) ? 1 : 0;
  const bool clean = m.ref_nan == 0 && m.e.nan_count == 0 && m.e.mismatched_inf == 0;
  m.ok = clean && (abs_only ? m.e.max_abs <= tol.max_abs : testkit::within(m.e, tol));
  return m;
}

ExecOptions opts_for(const Mode& m, Backend b) {
  ExecOptions o;
  o.backend = b;
  o.cpu_threads = m.threads;
  return o;
}

Outcome fail(Outcome out, const char* where, Status st) {
  out.status = std::move(st);
  out.where = where;
  return out;
}

// Ends a check early with the step that failed (set-up, plan, op or reference) and its Status;
// `out` is the Outcome being built in the enclosing function.
#define RUN_OR_FAIL(where, expr)                              \
  do {                                                        \
    Status _st = (expr);                                      \
    if (!_st.ok()) return fail(std::move(out), where, _st);   \
  } while (0)

Outcome check_attention(const AttnCase& c, const Mode& m) {
  Outcome out;
  std::mt19937_64 rng(c.seed);
  AttnTensors host;
  RUN_OR_FAIL("set-up", make_attention(c, cpu(), Fill::kExact, rng, &host));
  const ExecOptions cpu_opts = opts_for(m, Backend::kCPU);
  std::vector<float> o, lse, ref_o, ref_lse;
  AttentionPlan plan;
  if (m.naive) {
    RUN_OR_FAIL("plan", plan_attention(host.args(c), cpu_opts, &plan));
    out.kernel = plan.kernel;
    host.poison_outputs();
    RUN_OR_FAIL("op", attention_forward(host.args(c), cpu_opts, &plan));
    o = host.o.to_float();
    if (c.lse) lse = host.lse.to_float();
    std::vector<double> ro, rl;
    RUN_OR_FAIL("reference", testkit::naive_attention(host.args(c), &ro, &rl));
    ref_o = to_float(ro);
    ref_lse = to_float(rl);
  } else {
    AttnTensors dev = copy_attention(host, m.dev);
    const ExecOptions test_opts = opts_for(m, m.backend);
    RUN_OR_FAIL("plan", plan_attention(dev.args(c), test_opts, &plan));
    out.kernel = std::string(to_string(plan.backend)) + "/" + plan.kernel;
    if (plan.num_splits > 1) out.kernel += " splits=" + std::to_string(plan.num_splits);
    dev.poison_outputs();
    RUN_OR_FAIL("op", attention_forward(dev.args(c), test_opts, &plan));
    RUN_OR_FAIL("op (synchronize)", gpu::synchronize());
    o = dev.o.to_float();
    if (c.lse) lse = dev.lse.to_float();
    host.poison_outputs();
    RUN_OR_FAIL("reference", attention_forward(host.args(c), cpu_opts));
    ref_o = host.o.to_float();
    if (c.lse) ref_lse = host.lse.to_float();
  }
  out.metrics.push_back(measure("o", o, ref_o, float_tol(c.dtype)));
  if (c.lse) out.metrics.push_back(measure("lse", lse, ref_lse, testkit::kLse, true));
  return out;
}

Outcome check_merge(const MergeCase& c, const Mode& m) {
  Outcome out;
  std::mt19937_64 rng(c.seed);
  MergeTensors host;
  RUN_OR_FAIL("set-up", make_merge(c, cpu(), rng, &host));
  const ExecOptions cpu_opts = opts_for(m, Backend::kCPU);
  std::vector<float> o, lse, ref_o, ref_lse;
  if (m.naive) {
    out.kernel = "merge_states/cpu";
    host.poison_outputs();
    RUN_OR_FAIL("op", merge_states(host.args(), cpu_opts));
    o = host.o.to_float();
    if (c.lse) lse = host.lse.to_float();
    std::vector<double> ro, rl;
    RUN_OR_FAIL("reference", testkit::naive_merge_states(host.args(), &ro, &rl));
    ref_o = to_float(ro);
    ref_lse = to_float(rl);
  } else {
    out.kernel = std::string("merge_states/") + to_string(m.backend);
    MergeTensors dev = copy_merge(host, m.dev);
    dev.poison_outputs();
    RUN_OR_FAIL("op", merge_states(dev.args(), opts_for(m, m.backend)));
    RUN_OR_FAIL("op (synchronize)", gpu::synchronize());
    o = dev.o.to_float();
    if (c.lse) lse = dev.lse.to_float();
    host.poison_outputs();
    RUN_OR_FAIL("reference", merge_states(host.args(), cpu_opts));
    ref_o = host.o.to_float();
    if (c.lse) ref_lse = host.lse.to_float();
  }
  out.metrics.push_back(measure("o", o, ref_o, float_tol(c.dtype)));
  if (c.lse) out.metrics.push_back(measure("lse", lse, ref_lse, testkit::kLse, true));
  return out;
}

Outcome check_gdn(const GdnCase& c, const Mode& m) {
  Outcome out;
  std::mt19937_64 rng(c.seed);
  GdnTensors host;
  RUN_OR_FAIL("set-up", make_gdn(c, cpu(), Fill::kExact, rng, &host));
  const ExecOptions cpu_opts = opts_for(m, Backend::kCPU);
  std::vector<float> o, ht, ref_o, ref_ht;
  if (m.naive) {
    out.kernel = "gdn/cpu";
    host.poison_outputs();
    RUN_OR_FAIL("op", gdn_chunk_forward(host.args(c), cpu_opts));
    o = host.o.to_float();
    if (c.final_state) ht = host.ht.to_float();
    std::vector<double> ro, rh;
    RUN_OR_FAIL("reference", testkit::naive_gdn(host.args(c), &ro, &rh));
    ref_o = to_float(ro);
    ref_ht = to_float(rh);
  } else {
    out.kernel = std::string("gdn/") + to_string(m.backend);
    GdnTensors dev = copy_gdn(host, m.dev);
    dev.poison_outputs();
    RUN_OR_FAIL("op",
                detail::gdn_chunk_forward_with(dev.args(c), opts_for(m, m.backend), m.gdn_kernels));
    RUN_OR_FAIL("op (synchronize)", gpu::synchronize());
    o = dev.o.to_float();
    if (c.final_state) ht = dev.ht.to_float();
    host.poison_outputs();
    RUN_OR_FAIL("reference", gdn_chunk_forward(host.args(c), cpu_opts));
    ref_o = host.o.to_float();
    if (c.final_state) ref_ht = host.ht.to_float();
  }
  out.metrics.push_back(measure("o", o, ref_o, testkit::kGdn));
  if (c.final_state) out.metrics.push_back(measure("state", ht, ref_ht, testkit::kGdn));
  return out;
}

// Splits a pool into the slots the step used (gathered in sequence order) and all the others.
void split_pool(const std::vector<float>& pool, const std::vector<int32_t>& idx, size_t slot,
                std::vector<float>* used, std::vector<float>* others) {
  std::vector<bool> is_used(pool.size() / slot, false);
  used->clear();
  others->clear();
  for (int32_t i : idx) {
    is_used[i] = true;
    used->insert(used->end(), pool.begin() + i * slot, pool.begin() + (i + 1) * slot);
  }
  for (size_t s = 0; s < is_used.size(); ++s)
    if (!is_used[s]) others->insert(others->end(), pool.begin() + s * slot, pool.begin() + (s + 1) * slot);
}

Outcome check_gdn_decode(const GdnCase& c, const Mode& m) {
  Outcome out;
  std::mt19937_64 rng(c.seed);
  GdnDecodeTensors host;
  RUN_OR_FAIL("set-up", make_gdn_decode(c, cpu(), Fill::kExact, rng, &host));
  const ExecOptions cpu_opts = opts_for(m, Backend::kCPU);
  const std::vector<float> pool0 = host.pool.to_float();
  const std::vector<int32_t> idx = host.idx.to_int();
  const size_t slot = static_cast<size_t>(c.heads_v) * c.dim_k * c.dim_v;
  std::vector<float> o, pool, ref_o, ref_pool;
  if (m.naive) {
    out.kernel = "gdn-decode/cpu";
    // The naive reference is the recurrence over a one-token sequence per pool slot in use.
    const int64_t N = c.batch;
    testkit::Buffer h0(DType::kFloat32, {N, c.heads_v, c.dim_k, c.dim_v});
    std::vector<float> h0v(N * slot);
    for (int64_t n = 0; n < N; ++n)
      std::copy(pool0.begin() + idx[n] * slot, pool0.begin() + (idx[n] + 1) * slot, h0v.begin() + n * slot);
    h0.from_float(h0v);
    GdnChunkArgs a;
    a.q = make_view(host.q.data(), c.dtype, {N, 1, c.heads, c.dim_k});
    a.k = make_view(host.k.data(), c.dtype, {N, 1, c.heads, c.dim_k});
    a.v = make_view(host.v.data(), c.dtype, {N, 1, c.heads_v, c.dim_v});
    a.g = make_view(host.g.data(), DType::kFloat32, {N, 1, c.heads_v});
    a.beta = make_view(host.beta.data(), host.beta.dtype(), {N, 1, c.heads_v});
    a.initial_state = h0.view();
    a.o = make_view(host.o.data(), c.dtype, {N, 1, c.heads_v, c.dim_v});
    a.scale = c.scale;
    a.use_qk_l2norm = c.l2norm;
    std::vector<double> ro, rs;
    RUN_OR_FAIL("reference", testkit::naive_gdn(a, &ro, &rs));
    ref_o = to_float(ro);
    ref_pool = pool0;
    for (int64_t n = 0; n < N; ++n)
      for (size_t e = 0; e < slot; ++e) ref_pool[idx[n] * slot + e] = static_cast<float>(rs[n * slot + e]);
    host.poison_outputs();
    RUN_OR_FAIL("op", gdn_decode_step(host.args(c), cpu_opts));
    o = host.o.to_float();
    pool = host.pool.to_float();
  } else {
    out.kernel = std::string("gdn-decode/") + to_string(m.backend);
    GdnDecodeTensors dev = copy_gdn_decode(host, m.dev);
    dev.poison_outputs();
    RUN_OR_FAIL("op",
                detail::gdn_decode_step_with(dev.args(c), opts_for(m, m.backend), m.gdn_kernels));
    RUN_OR_FAIL("op (synchronize)", gpu::synchronize());
    o = dev.o.to_float();
    pool = dev.pool.to_float();
    host.poison_outputs();
    RUN_OR_FAIL("reference", gdn_decode_step(host.args(c), cpu_opts));
    ref_o = host.o.to_float();
    ref_pool = host.pool.to_float();
  }
  std::vector<float> used, others, ref_used, ref_others;
  split_pool(pool, idx, slot, &used, &others);
  split_pool(ref_pool, idx, slot, &ref_used, &ref_others);
  out.metrics.push_back(measure("o", o, ref_o, testkit::kGdn));
  out.metrics.push_back(measure("state", used, ref_used, testkit::kGdn));
  // Slots no sequence names must come back bit for bit.
  if (!others.empty()) out.metrics.push_back(measure("untouched", others, ref_others, kExact));
  return out;
}

// append_kv_cache writes caches (and per-token scales): every byte must equal the reference's.
Outcome check_append(const AppendCase& c, const Mode& m) {
  Outcome out;
  std::mt19937_64 rng(c.seed);
  AppendTensors host;
  RUN_OR_FAIL("set-up", make_append(c, cpu(), rng, &host));
  AppendTensors ref = copy_append(host, cpu());
  const ExecOptions cpu_opts = opts_for(m, Backend::kCPU);
  AppendTensors got;
  if (m.naive) {
    out.kernel = "append_kv_cache/cpu";
    got = copy_append(host, cpu());
    RUN_OR_FAIL("op", append_kv_cache(got.args(c), cpu_opts));
    RUN_OR_FAIL("reference", testkit::naive_append_kv(ref.args(c)));
  } else {
    out.kernel = std::string("append_kv_cache/") + to_string(m.backend);
    AppendTensors dev = copy_append(host, m.dev);
    RUN_OR_FAIL("op", append_kv_cache(dev.args(c), opts_for(m, m.backend)));
    RUN_OR_FAIL("op (synchronize)", gpu::synchronize());
    got = copy_append(dev, cpu());
    RUN_OR_FAIL("reference", append_kv_cache(ref.args(c), cpu_opts));
  }
  out.metrics.push_back(measure("k_cache", got.k_cache.to_float(), ref.k_cache.to_float(), kExact));
  out.metrics.push_back(measure("v_cache", got.v_cache.to_float(), ref.v_cache.to_float(), kExact));
  if (c.cache_fp8 == "token") {
    out.metrics.push_back(measure("k_scale", got.k_scale.to_float(), ref.k_scale.to_float(), kExact));
    out.metrics.push_back(measure("v_scale", got.v_scale.to_float(), ref.v_scale.to_float(), kExact));
  }
  return out;
}

Outcome run_case(const EdgeCase& e, const Mode& m) {
  switch (e.op) {
    case OpKind::kAttention: return check_attention(e.attn, m);
    case OpKind::kMerge: return check_merge(e.merge, m);
    case OpKind::kGdn: return check_gdn(e.gdn, m);
    case OpKind::kGdnDecode: return check_gdn_decode(e.gdn, m);
    case OpKind::kAppendKv: return check_append(e.append, m);
  }
  return {};
}

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::kAttention: return "attention";
    case OpKind::kMerge: return "merge";
    case OpKind::kGdn: return "gdn";
    case OpKind::kGdnDecode: return "gdn-decode";
    case OpKind::kAppendKv: return "append-kv";
  }
  return "?";
}

std::string describe(const EdgeCase& e) {
  switch (e.op) {
    case OpKind::kAttention: return e.attn.describe();
    case OpKind::kMerge: return e.merge.describe();
    case OpKind::kGdn: return e.gdn.describe(false);
    case OpKind::kGdnDecode: return e.gdn.describe(true);
    case OpKind::kAppendKv: return e.append.describe();
  }
  return "";
}

const char* verdict(const Outcome& r) {
  if (r.status.code() == StatusCode::kUnsupported) return "UNSUPPORTED";
  if (!r.status.ok()) return "ERROR";
  return r.pass() ? "PASS" : "FAIL";
}

void print_detail(const Outcome& r) {
  for (const Metric& m : r.metrics) {
    std::printf("  %-9s rel_l2 %s  max_abs %s  nan/unwritten %lld  inf_mismatch %lld  n %lld",
                m.name.c_str(), fmt_sci(m.e.rel_l2).c_str(), fmt_sci(m.e.max_abs).c_str(),
                static_cast<long long>(m.e.nan_count), static_cast<long long>(m.e.mismatched_inf),
                static_cast<long long>(m.e.count));
    if (m.ref_nan) std::printf("  reference NaN %lld", static_cast<long long>(m.ref_nan));
    if (m.abs_only) std::printf("   tol: max_abs <= %s", fmt_sci(m.tol.max_abs).c_str());
    else std::printf("   tol: rel_l2 <= %s, max_abs <= %s", fmt_sci(m.tol.rel_l2).c_str(),
                     fmt_sci(m.tol.max_abs).c_str());
    std::printf("   %s\n", m.ok ? "ok" : "FAIL");
  }
}

std::string short_metrics(const Outcome& r) {
  if (!r.status.ok()) return r.where + ": " + r.status.message();
  std::string s;
  for (const Metric& m : r.metrics)
    s += (s.empty() ? "" : "  ") + m.name + " " +
         (m.abs_only ? fmt_sci(m.e.max_abs) : fmt_sci(m.e.rel_l2) + "/" + fmt_sci(m.e.max_abs)) +
         (m.e.nan_count ? " nan=" + std::to_string(m.e.nan_count) : "") + (m.ok ? "" : " (!)");
  return s;
}

int exit_code(const Outcome& r) {
  if (r.status.code() == StatusCode::kUnsupported) return kExitUnsupported;
  return r.pass() ? kExitOk : kExitFail;
}

int run_edge_shapes(const Mode& m, bool allow_unsupported) {
  const std::vector<EdgeCase> cases = edge_cases();
  std::printf("edge shapes: %zu cases, %s\n", cases.size(), m.describe().c_str());
  int passed = 0, failed = 0, unsupported = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!m.naive && !gpu::context_usable()) {
      // A sticky CUDA error (e.g. an illegal address) poisons every later call: stop here.
      failed += static_cast<int>(cases.size() - i);
      std::printf("stopping: the CUDA context is unusable after case %zu; %zu cases not run\n", i,
                  cases.size() - i);
      break;
    }
    const auto c0 = std::chrono::steady_clock::now();
    const Outcome r = run_case(cases[i], m);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    const char* v = verdict(r);
    if (r.pass()) ++passed;
    else if (r.status.code() == StatusCode::kUnsupported) ++unsupported;
    else ++failed;
    std::printf("[%2zu/%zu] %-11s %-10s %-52s %-22s %5.2fs  %s   (%s)\n", i + 1, cases.size(), v,
                op_name(cases[i].op), describe(cases[i]).c_str(), r.kernel.c_str(), secs,
                short_metrics(r).c_str(), cases[i].why.c_str());
    std::fflush(stdout);
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("edge shapes: %d passed, %d failed, %d unsupported, of %zu (%.1f s)\n", passed,
              failed, unsupported, cases.size(), total);
  if (failed > 0) return kExitFail;
  if (unsupported > 0 && !allow_unsupported) return kExitFail;
  return kExitOk;
}

Flags make_flags() {
  Flags f("attnkit check [flags]",
          "Runs one op with random inputs and compares it with a reference: a GPU backend against\n"
          "the CPU backend (default where a CUDA device is found), or the CPU backend against the\n"
          "naive fp64 loops (--naive, --backend cpu, or no GPU). Outputs are poisoned first and every\n"
          "element must be written. Prints the kernel chosen, rel-L2, max-abs, NaN/unwritten count and\n"
          "PASS/FAIL with the tolerance used. Exit: 0 pass, 1 fail, 2 bad flags, 3 unsupported.");
  f.section("What to run")
      .add("op", FlagType::kString, "attention", "attention | merge | gdn | gdn-decode | append-kv")
      .add("edge-shapes", FlagType::kBool, "", "run the edge shapes of docs/design.md, not one op")
      .add("allow-unsupported", FlagType::kBool, "",
           "with --edge-shapes: unsupported cases do not make the exit status non-zero")
      .add("backend", FlagType::kString, "auto", "auto | cpu | cuda-portable | cuda-sm90")
      .add("naive", FlagType::kBool, "", "compare the CPU backend with the naive fp64 loops")
      .add("seed", FlagType::kInt, "1", "random seed for the inputs")
      .add("threads", FlagType::kInt, "0", "CPU backend threads (0 = all cores)")
      .add("gdn-kernels", FlagType::kString, "",
           "Gated DeltaNet CUDA kernels instead of the library's choice, a comma list of: "
           "mma-sync (what GPUs other than Hopper run), mma-sync-intra (the forward's intra "
           "stage only), decode-ring (at any batch), cols32 | cols64 (the sm90 state/output "
           "kernel's columns), cluster1 | cluster2 (its cluster size at 32 columns), segments<n> "
           "(the forward's chain split into up to n segments run in parallel)");
  f.section("Attention (--op attention; merge uses --splits, --seqlen-q, --heads-q, --dim-v)")
      .add("batch", FlagType::kInt, "", "batch size [default: 2; gdn 1; gdn-decode 8]")
      .add("seqlen-q", FlagType::kInt, "128", "queries per sequence (merge: tokens)")
      .add("seqlen-k", FlagType::kInt, "", "keys per sequence [default: --seqlen-q]")
      .add("varlen-q", FlagType::kIntList, "", "ragged Q: one length per sequence, e.g. 5,0,17")
      .add("varlen-k", FlagType::kIntList, "",
           "ragged KV lengths (with --paged: keys per sequence in the paged cache)")
      .add("seqused-k", FlagType::kIntList, "",
           "contiguous KV of --seqlen-k rows of which these many are used, per sequence")
      .add("heads-q", FlagType::kInt, "8", "query heads")
      .add("heads-kv", FlagType::kInt, "", "key/value heads [default: --heads-q]")
      .add("dim-qk", FlagType::kInt, "128", "q/k head dim")
      .add("dim-v", FlagType::kInt, "", "v head dim [default: --dim-qk; gdn 128]")
      .add("dtype", FlagType::kString, "bf16", "bf16 | fp16 | fp32")
      .add("mask", FlagType::kString, "none", "none | causal | window | chunked")
      .add("window-left", FlagType::kInt, "-1", "keys visible left of the diagonal (-1 = all)")
      .add("window-right", FlagType::kInt, "",
           "keys visible right of the diagonal (-1 = all) [default: 0 with causal, else -1]")
      .add("chunk", FlagType::kInt, "0", "chunked mask: block size")
      .add("softcap", FlagType::kFloat, "0", "tanh soft cap of the scaled scores (0 = off)")
      .add("alibi", FlagType::kBool, "", "ALiBi slopes 2^(-8(h+1)/Hq)")
      .add("sinks", FlagType::kBool, "", "one learned sink logit per query head")
      .add("paged", FlagType::kBool, "", "paged KV cache (pages handed out shuffled)")
      .add("page-size", FlagType::kInt, "16", "tokens per page")
      .add("kv-fp8", FlagType::kString, "",
           "an FP8 (e4m3) KV cache with scales per tensor | head | token | batch-head ([B, Hkv])")
      .add("q-fp8", FlagType::kString, "",
           "FP8 attention: e4m3 q too, scales per tensor | head | token | batch-head (needs "
           "--kv-fp8; O in --dtype)")
      .add("splits", FlagType::kInt, "0",
           "split-KV count (0 = library decides); merge: number of partial states [3]")
      .add("scale", FlagType::kFloat, "0", "softmax scale (0 = 1/sqrt(dim-qk); gdn: dim-k^-1/2)")
      .add("lse", FlagType::kBool, "", "also return and compare the log-sum-exp")
      .add("q-std", FlagType::kFloat, "1", "standard deviation of q (large values: large logits)");
  f.section("Gated DeltaNet (--op gdn | gdn-decode)")
      .add("heads", FlagType::kInt, "4", "q/k heads (H)")
      .add("heads-v", FlagType::kInt, "8", "value heads (HV, a multiple of H)")
      .add("seqlen", FlagType::kInt, "256", "tokens per sequence (T)")
      .add("varlen", FlagType::kIntList, "", "ragged: one length per sequence (B = 1)")
      .add("dim-k", FlagType::kInt, "128", "key head dim (K)")
      .add("initial-state", FlagType::kBool, "", "start from a random state")
      .add("l2norm", FlagType::kBool, "", "the op L2-normalises q and k (else inputs are unit-norm)")
      .add("pool", FlagType::kInt, "0", "gdn-decode: state-pool slots (0 = 2 x batch)");
  f.section("Paged KV cache append (--op append-kv; also --page-size, --heads-kv, --dim-qk, --dim-v,\n"
            "--dtype, --kv-fp8)")
      .add("tokens", FlagType::kInt, "37", "new tokens (every fifth slot is -1, padding)")
      .add("pages", FlagType::kInt, "8", "cache pages")
      .add("hnd", FlagType::kBool, "", "caches stored [pages, Hkv, page, D], passed as NHD views");
  return f;
}

Status build_mode(const Flags& f, Mode* m) {
  ATTNKIT_RETURN_IF_ERROR(parse_gdn_kernels(f.str("gdn-kernels"), &m->gdn_kernels));
  Backend b;
  if (!parse_backend(f.str("backend"), &b))
    return Status::Invalid("--backend must be auto, cpu, cuda-portable or cuda-sm90, got '" +
                           f.str("backend") + "'");
  m->threads = static_cast<int>(f.integer("threads"));
  gpu::DeviceFacts facts;
  std::string why;
  const bool have_gpu = gpu::device_facts(&facts, &why);
  if (f.boolean("naive") || b == Backend::kCPU) {
    if (b != Backend::kAuto && b != Backend::kCPU)
      return Status::Invalid("--naive checks the CPU backend; drop --backend or use --backend cpu");
    m->naive = true;
    m->backend = Backend::kCPU;
    return Status::Ok();
  }
  if (!have_gpu) {
    if (b != Backend::kAuto)
      return Status::Invalid(std::string("--backend ") + to_string(b) + " needs a CUDA device: " + why);
    m->note = "no CUDA device found (" + why +
              "): checking the CPU backend against the naive fp64 loops";
    m->naive = true;
    m->backend = Backend::kCPU;
    return Status::Ok();
  }
  m->naive = false;
  m->dev = cuda(0);
  m->backend = b;
  return Status::Ok();
}

int64_t int_or(const Flags& f, const char* name, int64_t def) {
  return f.given(name) ? f.integer(name) : def;
}

Status build_attention_case(const Flags& f, AttnCase* c) {
  c->batch = static_cast<int>(int_or(f, "batch", 2));
  c->seqlen_q = f.integer("seqlen-q");
  c->seqlen_k = int_or(f, "seqlen-k", c->seqlen_q);
  c->varlen_q = f.int_list("varlen-q");
  c->varlen_k = f.int_list("varlen-k");
  c->seqused_k = f.int_list("seqused-k");
  c->heads_q = static_cast<int>(f.integer("heads-q"));
  c->heads_kv = static_cast<int>(int_or(f, "heads-kv", c->heads_q));
  c->dim_qk = static_cast<int>(f.integer("dim-qk"));
  c->dim_v = static_cast<int>(int_or(f, "dim-v", c->dim_qk));
  if (!parse_dtype(f.str("dtype"), &c->dtype))
    return Status::Invalid("--dtype must be bf16, fp16 or fp32, got '" + f.str("dtype") + "'");
  const std::string mask = f.str("mask");
  Mask mk;
  if (mask == "causal") {
    mk = Mask::causal();
  } else if (mask == "window") {
    if (!f.given("window-left") && !f.given("window-right"))
      return Status::Invalid("--mask window needs --window-left and/or --window-right");
  } else if (mask == "chunked") {
    if (f.integer("chunk") <= 0) return Status::Invalid("--mask chunked needs --chunk N (N >= 1)");
  } else if (mask == "none") {
    if (f.given("window-left") || f.given("window-right") || f.given("chunk"))
      return Status::Invalid("window/chunk flags need --mask causal, window or chunked");
  } else {
    return Status::Invalid("--mask must be none, causal, window or chunked, got '" + mask + "'");
  }
  if (f.given("window-left")) mk.window_left = static_cast<int>(f.integer("window-left"));
  if (f.given("window-right")) mk.window_right = static_cast<int>(f.integer("window-right"));
  if (f.given("chunk")) mk.chunk_size = static_cast<int>(f.integer("chunk"));
  c->mask = mk;
  c->softcap = static_cast<float>(f.number("softcap"));
  c->alibi = f.boolean("alibi");
  c->sinks = f.boolean("sinks");
  c->paged = f.boolean("paged");
  c->page_size = static_cast<int>(f.integer("page-size"));
  c->kv_fp8 = f.str("kv-fp8");
  c->q_fp8 = f.str("q-fp8");
  c->num_splits = static_cast<int>(f.integer("splits"));
  c->scale = static_cast<float>(f.number("scale"));
  c->lse = f.boolean("lse");
  c->q_std = static_cast<float>(f.number("q-std"));
  c->seed = static_cast<uint64_t>(f.integer("seed"));
  return c->check();
}

Status build_gdn_case(const Flags& f, bool decode, GdnCase* c) {
  c->batch = static_cast<int>(int_or(f, "batch", decode ? 8 : 1));
  c->seqlen = f.integer("seqlen");
  c->varlen = f.int_list("varlen");
  c->heads = static_cast<int>(f.integer("heads"));
  c->heads_v = static_cast<int>(f.integer("heads-v"));
  c->dim_k = static_cast<int>(f.integer("dim-k"));
  c->dim_v = static_cast<int>(int_or(f, "dim-v", 128));
  if (!parse_dtype(f.str("dtype"), &c->dtype))
    return Status::Invalid("--dtype must be bf16, fp16 or fp32, got '" + f.str("dtype") + "'");
  c->initial_state = f.boolean("initial-state");
  c->l2norm = f.boolean("l2norm");
  c->scale = static_cast<float>(f.number("scale"));
  c->pool = static_cast<int>(f.integer("pool"));
  c->seed = static_cast<uint64_t>(f.integer("seed"));
  if (decode && !c->varlen.empty()) return Status::Invalid("--varlen does not apply to gdn-decode");
  return c->check(decode);
}

}  // namespace

int check_main(const std::vector<std::string>& args) {
  Flags f = make_flags();
  if (const auto done = parse_command_flags(f, args, "check")) return *done;
  Mode mode;
  Status st = build_mode(f, &mode);
  if (!st.ok()) {
    std::fprintf(stderr, "attnkit check: %s\n", st.message().c_str());
    return kExitUsage;
  }
  if (f.boolean("edge-shapes")) {
    if (!mode.note.empty()) std::printf("%s\n", mode.note.c_str());
    return run_edge_shapes(mode, f.boolean("allow-unsupported"));
  }

  EdgeCase e;
  const std::string op = f.str("op");
  if (op == "attention") {
    e.op = OpKind::kAttention;
    st = build_attention_case(f, &e.attn);
  } else if (op == "merge") {
    e.op = OpKind::kMerge;
    e.merge.parts = f.given("splits") ? static_cast<int>(f.integer("splits")) : 3;
    e.merge.tokens = f.integer("seqlen-q");
    e.merge.heads = static_cast<int>(f.integer("heads-q"));
    e.merge.dim = static_cast<int>(int_or(f, "dim-v", f.integer("dim-qk")));
    e.merge.lse = f.boolean("lse");
    e.merge.seed = static_cast<uint64_t>(f.integer("seed"));
    if (!parse_dtype(f.str("dtype"), &e.merge.dtype))
      st = Status::Invalid("--dtype must be bf16, fp16 or fp32");
  } else if (op == "gdn" || op == "gdn-decode") {
    e.op = op == "gdn" ? OpKind::kGdn : OpKind::kGdnDecode;
    st = build_gdn_case(f, e.op == OpKind::kGdnDecode, &e.gdn);
  } else if (op == "append-kv") {
    e.op = OpKind::kAppendKv;
    AppendCase& a = e.append;
    a.tokens = f.integer("tokens");
    a.pages = f.integer("pages");
    a.page_size = static_cast<int>(f.integer("page-size"));
    a.heads_kv = static_cast<int>(int_or(f, "heads-kv", 4));
    a.dim_k = static_cast<int>(f.integer("dim-qk"));
    a.dim_v = static_cast<int>(int_or(f, "dim-v", a.dim_k));
    a.cache_fp8 = f.str("kv-fp8");
    a.hnd = f.boolean("hnd");
    a.seed = static_cast<uint64_t>(f.integer("seed"));
    if (!parse_dtype(f.str("dtype"), &a.dtype) || a.dtype == DType::kFloat32)
      st = Status::Invalid("--dtype must be bf16 or fp16 for append-kv");
    else
      st = a.check();
  } else {
    st = Status::Invalid("--op must be attention, merge, gdn, gdn-decode or append-kv, got '" + op +
                         "'");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "attnkit check: %s\n", st.message().c_str());
    return kExitUsage;
  }

  if (!mode.note.empty()) std::printf("%s\n", mode.note.c_str());
  std::printf("check %s: %s\n", op_name(e.op), describe(e).c_str());
  std::printf("compare: %s\n", mode.describe().c_str());
  const Outcome r = run_case(e, mode);
  if (!r.kernel.empty()) std::printf("kernel: %s\n", r.kernel.c_str());
  if (!r.status.ok()) {
    std::printf("%s (%s): %s\n", verdict(r), r.where.c_str(), r.status.message().c_str());
    return exit_code(r);
  }
  print_detail(r);
  std::printf("%s\n", verdict(r));
  return exit_code(r);
}

}  // namespace attnkit::cli
