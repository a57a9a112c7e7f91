// `attnkit bench`: times attention prefill/decode and Gated DeltaNet prefill/decode on named shape
// sets, printing a table (and JSON for bench/compare.py). On a GPU: CUDA events, warm-up, median of
// N repeats, each call after an L2 flush as the anchors' do_bench does (gpu.h), input sets rotated
// where one would sit in L2. Without one: the CPU reference backend
// on smaller versions of the same sets, timed with std::chrono.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cases.h"
#include "commands.h"
#include "edge_shapes.h"
#include "flags.h"
#include "gpu.h"
#include "table.h"
#include "testkit/read_floor.h"
#include "testkit/timing.h"

namespace attnkit::cli {
namespace {

struct Item {
  OpKind op = OpKind::kAttention;
  std::string set;  // shape set it came from
  AttnCase attn;
  GdnCase gdn;
  std::string label() const {
    switch (op) {
      case OpKind::kAttention: return attn.op;
      case OpKind::kGdn: return "gdn";
      case OpKind::kGdnDecode: return "gdn-decode";
      default: return "merge";
    }
  }
  std::string shape() const {
    return op == OpKind::kAttention ? attn.describe() : gdn.describe(op == OpKind::kGdnDecode);
  }
};

struct Env {
  bool gpu = false;
  Device dev = cpu();
  Backend backend = Backend::kAuto;
  int warmup = 0, repeats = 0, threads = 0;
  int num_splits = 0;  // attention's AttentionArgs::num_splits (0: the planner decides)
  std::string decode_kernel = "auto";  // auto | sm90tma | threads: --decode-kernel
  detail::GdnKernels gdn_kernels;      // --gdn-kernels
  int64_t l2_bytes = 0;
};

struct Result {
  std::string kernel = "-";
  Status status;
  double ms = NAN, tflops = NAN, gbps = NAN;
  double floor_ms = NAN;  // decode on a GPU: the read floor of its K and V bytes (read_floor.h)
  double floor_loads_ms = NAN, floor_bulk_ms = NAN;  // the floor by each reader (bulk: sm_90+)
};

// ---------------------------------------------------------------- shape sets

AttnCase prefill(int b, int64_t s, int hq, int hkv, int d, bool causal) {
  AttnCase c;
  c.op = "attention";
  c.batch = b;
  c.seqlen_q = c.seqlen_k = s;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.dim_qk = c.dim_v = d;
  if (causal) c.mask = Mask::causal();
  return c;
}

// One query token per sequence against L keys; page_size 0 = contiguous KV.
AttnCase decode(int b, int64_t L, int page_size) {
  AttnCase c;
  c.op = "decode";
  c.batch = b;
  c.seqlen_q = 1;
  c.seqlen_k = L;
  c.heads_q = 32;
  c.heads_kv = 8;
  c.dim_qk = c.dim_v = 128;
  if (page_size > 0) {
    c.paged = true;
    c.page_size = page_size;
  }
  return c;
}

GdnCase gdn(int64_t t, std::vector<int64_t> varlen = {}, int64_t heads = 16, int64_t heads_v = 32) {
  GdnCase c;
  c.batch = 1;
  c.seqlen = t;
  c.varlen = std::move(varlen);
  c.heads = heads;
  c.heads_v = heads_v;
  c.initial_state = false;
  c.final_state = true;
  return c;
}

GdnCase gdn_decode(int n) {
  GdnCase c = gdn(1);
  c.batch = n;
  c.pool = n;  // every slot in use: the state bytes are the ones counted
  return c;
}

// The shape sets shape_set knows, in the order --help and the error message list them.
// The plan-name suffix of the Hopper (TMA) decode kernel (portable_dispatch.cu).
constexpr const char* kTmaPlanSuffix = "+sm90tma";

constexpr const char* kShapeSets[] = {"default", "fa3",   "varlen", "paged", "dims",       "splitkv",
                                      "decode",  "fp8kv", "gdn",    "gdn-serving"};

bool known_set(const std::string& s) {
  return std::find(std::begin(kShapeSets), std::end(kShapeSets), s) != std::end(kShapeSets);
}

// "a, b, c" or "a | b | c".
std::string shape_set_list(const char* sep) {
  std::string out;
  for (const char* s : kShapeSets) out += (out.empty() ? "" : sep) + std::string(s);
  return out;
}

// The GPU shapes, or (gpu = false) much smaller ones that the CPU backend finishes quickly.
std::vector<Item> shape_set(const std::string& set, bool gpu) {
  std::vector<Item> out;
  auto A = [&](AttnCase c) {
    Item it;
    it.op = OpKind::kAttention;
    it.set = set;
    it.attn = std::move(c);
    out.push_back(std::move(it));
  };
  auto G = [&](GdnCase c, bool dec) {
    Item it;
    it.op = dec ? OpKind::kGdnDecode : OpKind::kGdn;
    it.set = set;
    it.gdn = std::move(c);
    out.push_back(std::move(it));
  };
  if (set == "default") {
    for (bool causal : {false, true})
      A(gpu ? prefill(4, 4096, 16, 16, 128, causal) : prefill(1, 512, 8, 8, 128, causal));
    for (int b : gpu ? std::vector<int>{16, 1} : std::vector<int>{4, 1})
      for (int ps : {16, 64}) A(decode(b, gpu ? 8192 : 2048, ps));
    G(gpu ? gdn(16384) : gdn(512), false);
    for (int n : gpu ? std::vector<int>{32, 256} : std::vector<int>{4, 32}) G(gdn_decode(n), true);
  } else if (set == "fa3") {
    // FlashAttention-3 paper: batch x seqlen = 16k tokens, hidden 2048 (CPU: 1k tokens, hidden 512).
    const int64_t tokens = gpu ? 16384 : 1024, hidden = gpu ? 2048 : 512;
    const std::vector<int64_t> lens = gpu ? std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384}
                                          : std::vector<int64_t>{128, 256, 512, 1024};
    for (int d : {64, 128, 256})
      for (int64_t s : lens)
        for (bool causal : {false, true})
          A(prefill(static_cast<int>(tokens / s), s, static_cast<int>(hidden / d),
                    static_cast<int>(hidden / d), d, causal));
    // GQA 32/8 (Llama-3-8B heads) at 4k and 16k (CPU: 8/2 at 256 and 1k).
    for (int64_t s : gpu ? std::vector<int64_t>{4096, 16384} : std::vector<int64_t>{256, 1024})
      for (bool causal : {false, true})
        A(gpu ? prefill(static_cast<int>(16384 / s), s, 32, 8, 128, causal)
              : prefill(static_cast<int>(1024 / s), s, 8, 2, 128, causal));
  } else if (set == "varlen") {
    // Inference-engine prefill: 8 uneven packed sequences, 16k tokens (CPU: 1k), GQA 32/8 d128,
    // causal; the same tokens as an equal-length batch for comparison; sliding window 1k (Mistral /
    // Gemma style local layers) and learned sinks (GPT-OSS style) on the packed batch.
    const std::vector<int64_t> lens = gpu ? std::vector<int64_t>{5000, 300, 2500, 1200, 4000, 77, 2907, 384}
                                          : std::vector<int64_t>{300, 20, 150, 77, 200, 5, 190, 82};
    const int64_t total = gpu ? 16368 : 1024;
    AttnCase even = prefill(8, total / 8, 32, 8, 128, true);
    A(even);
    for (int variant = 0; variant < 3; ++variant) {
      AttnCase c = prefill(1, 0, 32, 8, 128, true);
      c.varlen_q = c.varlen_k = lens;
      if (variant == 1) c.mask = Mask::sliding_window(gpu ? 1024 : 64, 0);
      if (variant == 2) c.sinks = true;
      A(c);
    }
  } else if (set == "paged") {
    // Chunked prefill with a prefix cache (inference engines): each sequence's new queries attend
    // causally to its cached prefix and to themselves. GQA 32/8 d128 bf16. The same keys
    // contiguous, then in a paged cache of 128 / 256 / 64-key pages; 4 uneven sequences, packed
    // (ragged KV) and paged 128. (CPU: 1/8 of the lengths.)
    const int64_t div = gpu ? 1 : 8;
    AttnCase even = prefill(8, 2048 / div, 32, 8, 128, true);
    even.seqlen_k = 8192 / div;
    A(even);
    for (int ps : {128, 256, 64}) {
      AttnCase c = even;
      c.paged = true;
      c.page_size = ps;
      A(c);
    }
    AttnCase ragged = prefill(1, 0, 32, 8, 128, true);
    for (int64_t q : {1000, 2048, 300, 4000}) ragged.varlen_q.push_back(q / div);
    for (int64_t k : {5000, 2048, 9000, 4000}) ragged.varlen_k.push_back(k / div);
    A(ragged);
    ragged.paged = true;
    ragged.page_size = 128;
    A(ragged);
  } else if (set == "dims") {
    // The head dims beside 64 / 128 / 256: Dqk 192 / Dv 128 (DeepSeek-style) and 96; 16k tokens,
    // hidden 2048 by Dqk, causal and not (CPU: 1k tokens).
    const int64_t s = gpu ? 4096 : 256;
    for (auto [dqk, dv] : {std::pair{192, 128}, {96, 96}})
      for (bool causal : {false, true}) {
        AttnCase c = prefill(4, s, 2048 / dqk, 2048 / dqk, dqk, causal);
        c.dim_v = dv;
        A(c);
      }
  } else if (set == "splitkv") {
    // Where split-KV pays: few query tiles over many keys (a short chunk of prefill, or a few
    // speculative tokens x the GQA group, on a long context), batch 1, GQA 32/8 d128 bf16, causal
    // (bottom-right: nearly every key visible) and not. Compare --num-splits 1, N and 0 (the
    // planner's count) in one run.
    // (CPU: 1/8 of the lengths.)
    const int64_t div = gpu ? 1 : 8;
    for (int64_t sq : {128, 512})
      for (int64_t sk : {8192, 32768})
        for (bool causal : {true, false}) {
          AttnCase c = prefill(1, sq / div, 32, 8, 128, causal);
          c.seqlen_k = sk / div;
          A(c);
        }
  } else if (set == "decode") {
    for (int b : gpu ? std::vector<int>{1, 16, 64} : std::vector<int>{1, 4})
      for (int64_t L : gpu ? std::vector<int64_t>{1024, 8192, 32768} : std::vector<int64_t>{1024, 4096})
        for (int ps : {0, 16, 64}) A(decode(b, L, ps));
    if (gpu) {
      // At batch 16 x 8k keys: page size 1, then GQA groups 1, 8 and 16 and head dims 64 and 256,
      // contiguous and paged 16.
      A(decode(16, 8192, 1));
      const struct {
        int hq, hkv, d;
      } heads[] = {{8, 8, 128}, {64, 8, 128}, {128, 8, 128}, {32, 8, 64}, {32, 8, 256}};
      for (const auto& h : heads)
        for (int ps : {0, 16}) {
          AttnCase c = decode(16, 8192, ps);
          c.heads_q = h.hq;
          c.heads_kv = h.hkv;
          c.dim_qk = c.dim_v = h.d;
          A(c);
        }
    }
  } else if (set == "fp8kv") {
    // Paged decode over a 16-bit cache and over e4m3 caches with per-tensor and per-token
    // scales, bf16 and fp16 queries.
    for (int b : gpu ? std::vector<int>{1, 16, 64} : std::vector<int>{1, 4})
      for (int64_t L : gpu ? std::vector<int64_t>{8192, 32768} : std::vector<int64_t>{2048})
        for (DType dt : {DType::kBFloat16, DType::kFloat16})
          for (const char* kind : {"", "tensor", "token"}) {
            AttnCase c = decode(b, L, 16);
            c.dtype = dt;
            c.kv_fp8 = kind;
            A(c);
          }
  } else if (set == "gdn") {
    // Qwen3-Next linear-attention layer heads; the cases of bench/anchors_gdn.py.
    if (gpu) {
      for (int64_t t : {4096, 16384, 65536}) G(gdn(t), false);
      G(gdn(0, {1000, 7000, 3000, 5000, 2768, 8000, 4000, 2000}), false);
      for (int n : {1, 32, 256}) G(gdn_decode(n), true);
    } else {
      for (int64_t t : {256, 1024}) G(gdn(t), false);
      G(gdn(0, {100, 300, 50, 574}), false);
      for (int n : {1, 32}) G(gdn_decode(n), true);
    }
  } else if (set == "gdn-serving") {
    // The heads one GPU holds under tensor parallelism (Qwen3.5-397B: 2 / 8 at TP8, 4 / 16 at
    // TP4; Qwen3-Next 16 / 32, Qwen3.5-397B at TP1 16 / 64); bench/anchors_gdn.py --heads.
    const std::pair<int64_t, int64_t> heads[] = {{2, 8}, {4, 16}, {16, 32}, {16, 64}};
    const std::vector<int64_t> uneven = {1000, 7000, 3000, 5000, 2768, 8000, 4000, 2000};
    for (auto [h, hv] : heads) {
      for (int64_t t : gpu ? std::vector<int64_t>{16384, 65536} : std::vector<int64_t>{256})
        G(gdn(t, {}, h, hv), false);
      if (h <= 4) G(gdn(0, gpu ? uneven : std::vector<int64_t>{100, 300, 50}, h, hv), false);
    }
  }
  return out;
}

// ---------------------------------------------------------------- timing

// fn(call) runs one call; call numbers let it rotate through input sets.
Status time_calls(const Env& env, const std::function<Status(int)>& fn, double* ms) {
  std::vector<double> t;
  if (env.gpu) {
    ATTNKIT_RETURN_IF_ERROR(testkit::time_calls(fn, env.warmup, env.repeats, testkit::Flush::kL2, &t));
  } else {
    int call = 0;
    for (int i = 0; i < env.warmup; ++i) ATTNKIT_RETURN_IF_ERROR(fn(call++));
    for (int r = 0; r < env.repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      ATTNKIT_RETURN_IF_ERROR(fn(call++));
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
    }
  }
  *ms = testkit::median_ms(t);
  return Status::Ok();
}

// How many input sets to rotate through so that a call does not find its inputs in L2 from the
// previous one: enough to cover three times the L2 size, at most 64 and 4 GB.
int rotation_sets(const Env& env, size_t bytes_per_set) {
  if (!env.gpu || bytes_per_set == 0) return 1;
  const double want = std::ceil(3.0 * static_cast<double>(env.l2_bytes) / bytes_per_set);
  const double cap = std::floor(4e9 / bytes_per_set);
  return static_cast<int>(std::clamp(std::min(want, cap), 1.0, 64.0));
}

ExecOptions exec_opts(const Env& env) {
  ExecOptions o;
  o.backend = env.backend;
  o.cpu_threads = env.threads;
  return o;
}

// The first call of each op runs alone and is synchronised, so that an error surfaces with its own
// message before any timing.
Status first_call(const Env& env, const std::function<Status()>& fn) {
  ATTNKIT_RETURN_IF_ERROR(fn());
  return env.gpu ? gpu::synchronize() : Status::Ok();
}

Result run_attention(const AttnCase& case_in, const Env& env, std::mt19937_64& rng) {
  AttnCase c = case_in;
  if (env.num_splits > 0) c.num_splits = env.num_splits;
  Result r;
  std::vector<AttnTensors> sets(1);
  r.status = make_attention(c, env.dev, Fill::kFast, rng, &sets[0]);
  if (!r.status.ok()) return r;
  ExecOptions opts = exec_opts(env);
  AttentionPlan plan;
  r.status = plan_attention(sets[0].args(c), opts, &plan);
  if (!r.status.ok()) return r;
  // A decode kernel other than the planner's pick, asked for through the plan as a caller may
  // (the run refuses tensors the Hopper kernel cannot read, naming why).
  const size_t tma_at = plan.kernel.find(kTmaPlanSuffix);
  if (plan.kernel.find("_decode") != std::string::npos) {
    if (env.decode_kernel == "sm90tma" && tma_at == std::string::npos) plan.kernel += kTmaPlanSuffix;
    if (env.decode_kernel == "threads" && tma_at != std::string::npos)
      plan.kernel.erase(tma_at, std::string(kTmaPlanSuffix).size());
  }
  r.kernel = plan.kernel + (plan.num_splits > 1 ? " x" + std::to_string(plan.num_splits) : "");
  // As an engine runs it: the plan's workspace allocated once, not by the library on every call.
  testkit::Buffer workspace;
  if (plan.workspace_bytes > 0) {
    const auto words = static_cast<int64_t>((plan.workspace_bytes + 3) / 4);
    workspace = testkit::Buffer(DType::kFloat32, {words}, env.dev);
    opts.workspace = workspace.data();
    opts.workspace_bytes = workspace.bytes();
  }
  const int n = rotation_sets(env, sets[0].input_bytes());
  for (int i = 1; i < n && r.status.ok(); ++i) {
    sets.emplace_back();
    r.status = make_attention(c, env.dev, Fill::kFast, rng, &sets.back());
  }
  if (!r.status.ok()) return r;
  std::vector<AttentionArgs> args;
  for (auto& s : sets) args.push_back(s.args(c));
  r.status = first_call(env, [&] { return attention_forward(args[0], opts, &plan); });
  if (r.status.ok())
    r.status = time_calls(
        env, [&](int call) { return attention_forward(args[call % args.size()], opts, &plan); },
        &r.ms);
  if (r.status.ok()) {
    r.tflops = c.flops() / (r.ms * 1e9);
    r.gbps = c.kv_bytes() / (r.ms * 1e6);
  }
  // The read floor: the same number of K and V bytes (from the front of each set's buffers, so a
  // paged pool's unused pages do not count), read once under the same flush and rotation, by
  // 16-byte loads and (sm_90+) by bulk copies; the faster of the two is the floor.
  if (r.status.ok() && env.gpu && c.op == "decode") {
    const auto half = static_cast<size_t>(c.kv_bytes() / 2) / 16 * 16;
    std::vector<std::vector<testkit::ReadSpan>> spans;  // per input set, built before timing
    for (const AttnTensors& s : sets)
      spans.push_back({{s.k.data(), std::min(half, s.k.bytes())},
                       {s.v.data(), std::min(half, s.v.bytes())}});
    auto of = [&](int call) -> const std::vector<testkit::ReadSpan>& {
      return spans[call % spans.size()];
    };
    r.status = time_calls(
        env, [&](int call) { return testkit::read_once(of(call)); }, &r.floor_loads_ms);
    if (r.status.ok() && testkit::read_once_bulk(of(0)).ok())
      r.status = time_calls(
          env, [&](int call) { return testkit::read_once_bulk(of(call)); }, &r.floor_bulk_ms);
    r.floor_ms = std::isnan(r.floor_bulk_ms) ? r.floor_loads_ms
                                             : std::min(r.floor_loads_ms, r.floor_bulk_ms);
  }
  return r;
}

std::string gdn_backend_name(const Env& env) {
  if (env.backend != Backend::kAuto) return to_string(env.backend);
  return env.gpu ? "cuda (auto)" : "cpu";
}

Result run_gdn(const GdnCase& c, const Env& env, std::mt19937_64& rng) {
  Result r;
  r.kernel = "gdn/" + gdn_backend_name(env) +
             (env.gdn_kernels.segments > 1 ? "+segments" + std::to_string(env.gdn_kernels.segments)
                                           : std::string());
  std::vector<GdnTensors> sets(1);
  r.status = make_gdn(c, env.dev, Fill::kFast, rng, &sets[0]);
  if (!r.status.ok()) return r;
  const size_t bytes = sets[0].q.bytes() + sets[0].k.bytes() + sets[0].v.bytes();
  for (int i = 1; i < rotation_sets(env, bytes) && r.status.ok(); ++i) {
    sets.emplace_back();
    r.status = make_gdn(c, env.dev, Fill::kFast, rng, &sets.back());
  }
  if (!r.status.ok()) return r;
  const ExecOptions opts = exec_opts(env);
  std::vector<GdnChunkArgs> args;
  for (auto& s : sets) args.push_back(s.args(c));
  r.status = first_call(
      env, [&] { return detail::gdn_chunk_forward_with(args[0], opts, env.gdn_kernels); });
  if (r.status.ok())
    r.status = time_calls(
        env,
        [&](int call) {
          return detail::gdn_chunk_forward_with(args[call % args.size()], opts, env.gdn_kernels);
        },
        &r.ms);
  if (r.status.ok()) {
    r.tflops = c.flops() / (r.ms * 1e9);
    const double io = static_cast<double>(bytes + sets[0].o.bytes() + sets[0].ht.bytes());
    r.gbps = io / (r.ms * 1e6);
  }
  return r;
}

Result run_gdn_decode(const GdnCase& c, const Env& env, std::mt19937_64& rng) {
  Result r;
  r.kernel = "gdn-decode/" + gdn_backend_name(env);
  std::vector<GdnDecodeTensors> sets(1);
  r.status = make_gdn_decode(c, env.dev, Fill::kFast, rng, &sets[0]);
  if (!r.status.ok()) return r;
  for (int i = 1; i < rotation_sets(env, sets[0].pool.bytes()) && r.status.ok(); ++i) {
    sets.emplace_back();
    r.status = make_gdn_decode(c, env.dev, Fill::kFast, rng, &sets.back());
  }
  if (!r.status.ok()) return r;
  const ExecOptions opts = exec_opts(env);
  std::vector<GdnDecodeArgs> args;
  for (auto& s : sets) args.push_back(s.args(c));
  r.status = first_call(
      env, [&] { return detail::gdn_decode_step_with(args[0], opts, env.gdn_kernels); });
  if (r.status.ok())
    r.status = time_calls(
        env,
        [&](int call) {
          return detail::gdn_decode_step_with(args[call % args.size()], opts, env.gdn_kernels);
        },
        &r.ms);
  if (r.status.ok()) r.gbps = c.decode_state_bytes() / (r.ms * 1e6);
  return r;
}

// ---------------------------------------------------------------- output

JsonObject json_row(const Item& it, const Result& r, const Env& env) {
  JsonObject j;
  j.set("op", it.label()).set("set", it.set).set("shape", it.shape()).set("kernel", r.kernel);
  j.set("backend", to_string(env.backend));
  j.set("ms", r.ms).set("tflops", r.tflops).set("gbps", r.gbps).set("floor_ms", r.floor_ms);
  j.set("floor_loads_ms", r.floor_loads_ms).set("floor_bulk_ms", r.floor_bulk_ms);
  j.set("status", r.status.ok() ? "ok" : r.status.message());
  j.set("status_code", to_string(r.status.code()));
  if (it.op == OpKind::kAttention) {
    const AttnCase& c = it.attn;
    j.set("b", c.batch).set("sq", c.seqlen_q).set("sk", c.seqlen_k);
    j.set("hq", c.heads_q).set("hkv", c.heads_kv).set("d", c.dim_qk).set("dv", c.dim_v);
    j.set("causal", c.mask.window_right == 0 && c.mask.window_left < 0 && c.mask.chunk_size == 0);
    j.set("paged", c.paged).set("page_size", c.paged ? c.page_size : 0);
    j.set("dtype", to_string(c.dtype));
    j.set("flops", c.flops()).set("kv_bytes", c.kv_bytes());
    j.set("kv_dtype", to_string(c.kv_dtype())).set("kv_scale", c.kv_fp8);
  } else {
    const GdnCase& c = it.gdn;
    const bool dec = it.op == OpKind::kGdnDecode;
    j.set("b", c.batch).set("T", dec ? int64_t{1} : c.total_tokens());
    j.set("n_seqs", c.num_seqs()).set("varlen", !c.varlen.empty());
    j.set("H", c.heads).set("HV", c.heads_v).set("K", c.dim_k).set("V", c.dim_v);
    j.set("dtype", to_string(c.dtype));
    if (dec) j.set("state_bytes", c.decode_state_bytes());
    else j.set("flops_est", c.flops());
  }
  return j;
}

std::string now_utc() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

Flags make_flags() {
  Flags f("attnkit bench [flags]",
          "Times attention prefill and decode and Gated DeltaNet prefill and decode on a shape set\n"
          "and prints: op, shape, kernel chosen, median time, TFLOP/s (attention: 4*D per visible\n"
          "query-key pair per head; GDN: the chunked algorithm's estimate, as fla's) or GB/s (decode:\n"
          "K and V bytes read; GDN decode: state bytes read + written), and a status ('ok' or why the\n"
          "op did not run). On a GPU: CUDA events after warm-up, each call after a 256 MB L2 flush (as\n"
          "the anchors' triton do_bench), inputs rotated where they fit in L2; decode rows also give\n"
          "the read floor (the faster of two kernels that only read the same K and V bytes, by\n"
          "16-byte loads and, on sm_90+, by bulk copies; timed alike) and the share of the call's\n"
          "time it is.\n"
          "Without one: the CPU reference backend on smaller shapes.\n"
          "Shape sets: default (prefill 4x4096 h16 d128, paged decode, GDN 16k + decode), fa3 (the\n"
          "FlashAttention-3 paper's: 16k tokens, hidden 2048, d 64/128/256, seqlen 512..16k, plus GQA\n"
          "32/8 at 4k and 16k), varlen (8 uneven packed sequences, 16k tokens, GQA 32/8 d128 causal;\n"
          "an equal-length batch, a 1k sliding window, sinks), paged (chunked prefill with a prefix\n"
          "cache: 8 x 2k queries on 8k keys causal, GQA 32/8 d128, contiguous and paged 128/256/64;\n"
          "4 uneven packed sequences, ragged and paged 128), dims (head dims 192/128 and 96, 4 x 4k,\n"
          "causal and not), splitkv (batch 1, 128 / 512 queries on 8k / 32k keys, GQA 32/8 d128,\n"
          "causal and not: for --num-splits), decode (B 1/16/64 x L 1k/8k/32k,\n"
          "contiguous and paged 16/64; at B 16 x 8k also page 1, GQA 8/8, 64/8, 128/8 and head dims\n"
          "64 and 256), fp8kv (paged 16 decode, B 1/16/64 x L 8k/32k, over a 16-bit\n"
          "cache and e4m3 caches with per-tensor and per-token scales; bf16 and fp16 queries),\n"
          "gdn (T 4k/16k/64k, varlen 8 seqs 32k, decode B 1/32/256), gdn-serving (H/HV 2/8,\n"
          "4/16, 16/32, 16/64 at T 16k and 64k; varlen 8 seqs 32k at 2/8 and 4/16).");
  f.add("shapes", FlagType::kString, "default", shape_set_list(" | ") + ", or a comma list")
      .add("backend", FlagType::kString, "auto", "auto | cpu | cuda-portable | cuda-sm90")
      .add("repeats", FlagType::kInt, "", "timed calls per shape; the median is reported "
                                          "[default: 50 on a GPU, 3 on the CPU]")
      .add("warmup", FlagType::kInt, "", "untimed calls first [default: 10 on a GPU, 1 on the CPU]")
      .add("json", FlagType::kString, "", "also write the results as JSON to this file ('-': stdout)")
      .add("filter", FlagType::kString, "", "run only rows whose 'op shape' contains this text")
      .add("list", FlagType::kBool, "", "list the shapes that would run, and stop")
      .add("num-splits", FlagType::kInt, "0",
           "attention split-KV count for every shape (0 = the planner decides; capped as "
           "num_splits is)")
      .add("decode-kernel", FlagType::kString, "auto",
           "auto | sm90tma | threads: decode plans as the planner makes them, or always on the "
           "Hopper (TMA) decode kernel, or always on the decode kernel's thread copies")
      .add("gdn-kernels", FlagType::kString, "",
           "Gated DeltaNet CUDA kernels instead of the library's choice (as attnkit check "
           "--gdn-kernels), e.g. segments8")
      .add("threads", FlagType::kInt, "0", "CPU backend threads (0 = all cores)")
      .add("seed", FlagType::kInt, "1", "random seed for the inputs");
  return f;
}

}  // namespace

int bench_main(const std::vector<std::string>& args) {
  Flags f = make_flags();
  if (const auto done = parse_command_flags(f, args, "bench")) return *done;
  Env env;
  if (!parse_backend(f.str("backend"), &env.backend)) {
    std::fprintf(stderr, "attnkit bench: --backend must be auto, cpu, cuda-portable or cuda-sm90\n");
    return kExitUsage;
  }
  env.decode_kernel = f.str("decode-kernel");
  if (const Status gk = parse_gdn_kernels(f.str("gdn-kernels"), &env.gdn_kernels); !gk.ok()) {
    std::fprintf(stderr, "attnkit bench: %s\n", gk.message().c_str());
    return kExitUsage;
  }
  if (env.decode_kernel != "auto" && env.decode_kernel != "sm90tma" &&
      env.decode_kernel != "threads") {
    std::fprintf(stderr, "attnkit bench: --decode-kernel must be auto, sm90tma or threads\n");
    return kExitUsage;
  }
  std::vector<std::string> sets;
  {
    std::stringstream ss(f.str("shapes"));
    std::string s;
    while (std::getline(ss, s, ','))
      if (!s.empty()) sets.push_back(s);
    for (const auto& s : sets)
      if (!known_set(s)) {
        std::fprintf(stderr, "attnkit bench: unknown shape set '%s' (%s)\n", s.c_str(),
                     shape_set_list(", ").c_str());
        return kExitUsage;
      }
    if (sets.empty()) sets.push_back("default");
  }

  gpu::DeviceFacts facts;
  std::string why;
  const bool have_gpu = gpu::device_facts(&facts, &why);
  std::string device = "cpu";
  if (env.backend == Backend::kCPU) {
    std::printf("--backend cpu: running the CPU reference backend on the smaller CPU shapes\n");
  } else if (!have_gpu) {
    if (env.backend != Backend::kAuto) {
      std::fprintf(stderr, "attnkit bench: --backend %s needs a CUDA device: %s\n",
                   to_string(env.backend), why.c_str());
      return kExitUsage;
    }
    std::printf("no CUDA device found (%s): running the CPU reference backend on smaller %s "
                "shapes\n", why.c_str(), f.str("shapes").c_str());
  } else {
    env.gpu = true;
    env.dev = cuda(0);
    env.l2_bytes = facts.l2_bytes;
    device = facts.name;
  }
  env.warmup = static_cast<int>(f.given("warmup") ? f.integer("warmup") : env.gpu ? 10 : 1);
  env.repeats = static_cast<int>(f.given("repeats") ? f.integer("repeats") : env.gpu ? 50 : 3);
  env.threads = static_cast<int>(f.integer("threads"));
  env.num_splits = static_cast<int>(f.integer("num-splits"));
  if (env.repeats < 1 || env.warmup < 0 || env.num_splits < 0) {
    std::fprintf(stderr, "attnkit bench: --repeats must be >= 1, --warmup and --num-splits >= 0\n");
    return kExitUsage;
  }

  std::vector<Item> items;
  for (const auto& s : sets)
    for (Item& it : shape_set(s, env.gpu))
      if ((it.label() + " " + it.shape()).find(f.str("filter")) != std::string::npos)
        items.push_back(std::move(it));
  if (f.boolean("list")) {
    for (const Item& it : items) std::printf("%-10s %-12s %s\n", it.set.c_str(), it.label().c_str(), it.shape().c_str());
    return kExitOk;
  }

  std::printf("attnkit %s bench on %s, backend %s: median of %d calls after %d warm-up\n",
              version(), device.c_str(), to_string(env.backend), env.repeats, env.warmup);
  std::fflush(stdout);
  Table table({"op", "shape", "kernel", "ms", "TFLOP/s", "GB/s", "floor ms", "% floor", "status"});
  std::vector<JsonObject> rows;
  bool hard_error = false;
  JsonObject meta;
  meta.set("tool", "attnkit bench").set("version", version()).set("date", now_utc());
  meta.set("device", device).set("gpu", env.gpu).set("backend", to_string(env.backend));
  meta.set("cuda_build", built_with_cuda()).set("cuda_archs", cuda_architectures())
      .set("kernels", kernel_filter());
  meta.set("shapes", f.str("shapes")).set("repeats", env.repeats).set("warmup", env.warmup);
  meta.set("timing", env.gpu ? "cuda events, median" : "std::chrono, median");
  // Rewritten after every row, so that a run that dies part-way keeps what it measured.
  const std::string json_path = f.str("json");
  auto write_json = [&]() -> bool {
    if (json_path.empty() || json_path == "-") return true;
    std::ofstream out(json_path);
    out << json_document(meta, rows);
    return static_cast<bool>(out);
  };
  bool context_lost = false;
  std::mt19937_64 rng(static_cast<uint64_t>(f.integer("seed")));
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    std::fprintf(stderr, "bench [%zu/%zu] %s %s ...\n", i + 1, items.size(), it.label().c_str(),
                 it.shape().c_str());
    Result r;
    if (context_lost) {
      r.status = Status::Cuda("not run: an earlier CUDA error left the device unusable");
    } else {
      switch (it.op) {
        case OpKind::kAttention: r = run_attention(it.attn, env, rng); break;
        case OpKind::kGdn: r = run_gdn(it.gdn, env, rng); break;
        case OpKind::kGdnDecode: r = run_gdn_decode(it.gdn, env, rng); break;
        default: break;
      }
      if (r.status.code() == StatusCode::kCudaError && env.gpu && !gpu::context_usable()) {
        context_lost = true;
        std::fprintf(stderr, "bench: CUDA context lost (%s); the remaining shapes will not run\n",
                     r.status.message().c_str());
      }
    }
    if (!r.status.ok() && r.status.code() != StatusCode::kUnsupported) hard_error = true;
    const bool bytes_bound = it.op == OpKind::kGdnDecode || it.attn.op == "decode";
    const std::string status = r.status.ok() ? "ok"
                               : r.status.code() == StatusCode::kUnsupported
                                   ? "n/a: " + r.status.message()
                                   : std::string(to_string(r.status.code())) + ": " + r.status.message();
    table.add_row({it.label(), it.shape(), r.kernel, fmt(r.ms, bytes_bound ? 4 : 3),
                   bytes_bound ? "" : fmt_rate(r.tflops),
                   bytes_bound ? fmt_rate(r.gbps) : "", fmt(r.floor_ms, 4),
                   fmt(100.0 * r.floor_ms / r.ms, 1), status});
    rows.push_back(json_row(it, r, env));
    if (!write_json()) {
      std::fprintf(stderr, "attnkit bench: could not write %s\n", json_path.c_str());
      return kExitFail;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s", table.render().c_str());
  std::printf("(%zu shapes in %.1f s)\n", items.size(), secs);

  if (json_path == "-") std::printf("%s", json_document(meta, rows).c_str());
  else if (!json_path.empty()) std::fprintf(stderr, "bench: wrote %s\n", json_path.c_str());
  return hard_error ? kExitFail : kExitOk;
}

}  // namespace attnkit::cli
