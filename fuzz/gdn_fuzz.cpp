// libFuzzer target over the Gated DeltaNet entry points on the CPU backend (gdn_chunk_forward,
// gdn_recurrent_forward, gdn_decode_step, the five chunked stages and gdn_num_chunks): the input
// bytes choose the op, heads (H, HV), head sizes K and V (the CPU serves 1 .. 256; 257 and 0 are
// refused), dtypes (token tensors bf16 / fp16 / fp32, beta fp32 or q's dtype, intermediates fp32 or
// bf16), padded strides, fixed-length or ragged batches with the raw contents of cu_seqlens (or a
// non-decreasing one), optional initial / final states (aliased now and then) and the decode state
// pool in fla's [P, HV, K, V] layout or key-last [P, HV, V, K] passed as its transposed view, the
// raw contents of state_indices (or distinct in-range slots), several tokens per sequence with
// step_states and update_pool, the decode step's fused gating (the layer's parameters instead of
// g and beta, or both), and now and then one argument made wrong. Sequences stay short (<= 80
// tokens: one or two 64-token chunks, fewer with large heads)
// and heads few (<= 4) so each execution is fast. Every tensor is its own heap allocation of
// exactly the span its view claims, so AddressSanitizer reports any read or write outside it. The
// op must return a Status (any code) and never crash. Built with -DATTNKIT_BUILD_FUZZERS=ON
// (clang); run by scripts/fuzz.sh.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attnkit/gdn.h"

#include "fuzz_input.h"

namespace {

using namespace attnkit::fuzz;

// A state tensor [n, hv, k, v] (fp32): layout 0 row-major, 1 key-last ([n, hv, v, k] in memory,
// passed transposed), 2 contiguous in neither K nor V ([n, k, v, hv] in memory; refused unless
// hv == 1 or k or v is 1).
Owned state(int64_t n, int64_t hv, int64_t k, int64_t v, int layout, int64_t pad, Bytes& in) {
  using attnkit::DType;
  if (layout == 1) return make_perm(DType::kFloat32, {n, hv, v, k}, {0, 1, 3, 2}, pad, in);
  if (layout == 2) return make_perm(DType::kFloat32, {n, k, v, hv}, {0, 3, 1, 2}, 0, in);
  return make(DType::kFloat32, {n, hv, k, v}, pad, in);
}

// Gates in log space: the input's small positive floats, negated.
void negate(Owned& t) {
  if (t.view.dtype != attnkit::DType::kFloat32) return;
  auto* v = reinterpret_cast<float*>(t.mem.data());
  for (size_t i = 0; i < t.mem.size() / 4; ++i) v[i] = -v[i];
}

const char* kOpNames[] = {"chunk_forward", "recurrent_forward", "decode_step", "chunk_cumsum",
                          "kkt_inverse",   "wu",                "state_pass",  "chunk_output"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnkit;
  Bytes in{data, size};
  // chunk_forward and decode_step twice as often as the others.
  static const int kOps[10] = {0, 0, 1, 2, 2, 3, 4, 5, 6, 7};
  const int op = kOps[in.pick(9)];
  const int h = 1 + in.pick(1);
  // Head sizes: mostly small (fast); now and then the GPU's 128, 1, an odd size or a refused 257.
  static const int kDims[16] = {4, 8, 16, 4, 8, 16, 32, 32, 1, 3, 64, 128, 4, 8, 257, 128};
  const int kd = kDims[in.pick(15)] * (in.pick(63) == 63 ? 0 : 1);
  const int vd = in.pick(3) == 0 ? kDims[in.pick(15)] : kd;
  static const DType kTypes[4] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32,
                                  DType::kBFloat16};
  const DType dt = kTypes[in.pick(3)];
  const DType bt = in.pick(1) ? DType::kFloat32 : dt;  // beta
  const int64_t pad = in.pick(1) ? 8 : 0;
  // 0: all valid as far as the shapes go; 1..6: one argument made wrong.
  const int wrong = in.pick(15) < 13 ? 0 : 1 + in.pick(5);
  const int hv = wrong == 1 ? h * (1 + in.pick(1)) + 1 : h * (1 + in.pick(1));
  const DType kt = wrong == 2 ? (dt == DType::kFloat16 ? DType::kBFloat16 : DType::kFloat16) : dt;
  const float scale = wrong == 3 ? NAN : in.pick(3) == 0 ? 0.5f : 0.f;
  const bool l2 = in.pick(1);
  const ExecOptions opts = cpu_opts();
  Status st;

  if (op == 2) {  // decode: new tokens per sequence against a pool of states
    const int n = (1 + in.pick(4)) % 5, pool = (1 + in.pick(5)) % 6;
    const int tokens = in.pick(3);  // 0: one token ([N, ...]); else [N, tokens, ...]
    auto tok = [&](std::initializer_list<int64_t> rest) {
      std::vector<int64_t> d{n};
      if (tokens > 0) d.push_back(tokens);
      d.insert(d.end(), rest);
      return d;
    };
    Owned q, k, v, g, beta, sp, idx, o, steps;
    q = make(dt, tok({h, kd}), pad, in);
    k = make(kt, tok({h, kd}), 0, in);
    v = make(dt, tok({hv, vd}), pad, in);
    g = make(DType::kFloat32, tok({hv}), 0, in);
    negate(g);
    beta = make(bt, tok({hv}), in.pick(1) ? 8 : 0, in);
    o = make(dt, tok({hv, wrong == 4 ? vd + 1 : vd}), pad, in);
    if (in.pick(1))  // step states now and then, their token count wrong now and then
      steps = make(DType::kFloat32, {n, std::max(tokens, 1) + (in.pick(7) == 7), hv, kd, vd}, 0, in);
    sp = state(pool, hv, kd, vd, wrong == 5 ? 2 : in.pick(1), in.pick(1) ? 8 : 0, in);
    if (in.pick(2) == 2 || pool == 0) {
      idx = ints({n}, in);  // raw: negative, out of range, repeated
    } else {
      idx = make(DType::kInt32, {n}, 0, in);
      auto* s = reinterpret_cast<int32_t*>(idx.mem.data());
      const int start = in.pick(255);
      for (int i = 0; i < n; ++i) s[i] = (start + i) % pool;  // distinct while n <= pool
    }
    if (wrong == 6) idx = make(DType::kInt32, {n + 1}, 0, in);
    // Fused gating now and then: the layer's parameters instead of g and beta (both, sometimes).
    Owned a_log, ga, dt_bias, gb;
    const int gating = in.pick(3);  // 0, 1: g and beta; 2: fused; 3: both (refused)
    if (gating >= 2) {
      a_log = make(DType::kFloat32, {hv}, 0, in);
      dt_bias = make(DType::kFloat32, {hv}, 0, in);
      ga = make(bt, tok({hv}), 0, in);
      gb = make(bt, tok({hv}), 0, in);
    }
    GdnDecodeArgs a;
    a.q = q.view;
    a.k = k.view;
    a.v = v.view;
    if (gating != 2) {
      a.g = g.view;
      a.beta = beta.view;
    }
    a.A_log = a_log.view;
    a.a = ga.view;
    a.dt_bias = dt_bias.view;
    a.b = gb.view;
    a.state_pool = sp.view;
    a.state_indices = idx.view;
    a.o = o.view;
    a.step_states = steps.view;
    a.update_pool = in.pick(3) != 0;
    a.scale = scale;
    a.use_qk_l2norm = l2;
    st = gdn_decode_step(a, opts);
  } else {
    // Token tensors [b, t, ...]; ragged (b = 1, cu_seqlens [n+1]) or fixed-length (n = b).
    const bool varlen = in.pick(1);
    // Up to 80 tokens (two chunks), fewer for large heads: about t * HV * (K V + 64 (K + V)) <=
    // 2^18 multiply-adds per sequence keeps an execution at a few ms under the sanitizers.
    const int64_t per_token = int64_t{hv} * (int64_t{kd} * vd + 64 * (kd + vd));
    const int64_t t_max = (int64_t{1} << 18) / std::max<int64_t>(per_token, 1);
    const int t = static_cast<int>(
        std::min<int64_t>(in.pick(3) == 0 ? 64 + in.pick(16) : in.pick(40), t_max));
    const int b = varlen ? (in.pick(15) == 15 ? 2 : 1) : 1 + in.pick(1);
    const int n = varlen ? (1 + in.pick(4)) % 5 : b;
    Owned cu;
    if (varlen) {
      if (in.pick(2) == 2) {
        cu = ints({n + 1}, in);  // raw: negative, decreasing, past t
      } else {
        cu = make(DType::kInt32, {n + 1}, 0, in);
        auto* c = reinterpret_cast<int32_t*>(cu.mem.data());
        c[0] = 0;
        for (int i = 1; i <= n; ++i) c[i] = std::min(t, c[i - 1] + in.pick(t));
        if (in.pick(1)) c[n] = t;
      }
    }
    const DType it = in.pick(1) ? DType::kFloat32 : DType::kBFloat16;  // intermediates
    const DType other = it == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
    const DType it2 = in.pick(3) == 0 ? other : it;
    const int vd_o = wrong == 4 ? vd + 1 : vd;
    Owned q, k, v, g, beta, o, init, fin, gc, ainv, w, u, hh, vn;
    const bool has_init = in.pick(1), has_fin = in.pick(1);
    const bool alias = has_init && has_fin && in.pick(1);
    const int init_layout = wrong == 5 ? 2 : in.pick(1);
    const int n_state = wrong == 6 ? n + 1 : n;

    if (op == 0 || op == 1) {
      q = make(dt, {b, t, h, kd}, pad, in);
      k = make(kt, {b, t, h, kd}, in.pick(1) ? 8 : 0, in);
      v = make(dt, {b, t, hv, vd}, pad, in);
      g = make(DType::kFloat32, {b, t, hv}, 0, in);
      negate(g);
      beta = make(bt, {b, t, hv}, 0, in);
      o = make(dt, {b, t, hv, vd_o}, pad, in);
      if (has_init) init = state(n_state, hv, kd, vd, init_layout, pad, in);
      if (has_fin && !alias) fin = state(n, hv, kd, vd, in.pick(1), pad, in);
      GdnChunkArgs a;
      a.q = q.view;
      a.k = k.view;
      a.v = v.view;
      a.g = g.view;
      a.beta = beta.view;
      a.cu_seqlens = cu.view;
      a.initial_state = init.view;
      a.final_state = alias ? init.view : fin.view;  // final may be the same memory as initial
      a.o = o.view;
      a.scale = scale;
      a.use_qk_l2norm = l2;
      st = op == 0 ? gdn_chunk_forward(a, opts) : gdn_recurrent_forward(a, opts);
    } else if (op == 3) {
      g = make(DType::kFloat32, {b, t, hv}, pad, in);
      negate(g);
      const DType gt = wrong == 2 ? DType::kBFloat16 : DType::kFloat32;
      gc = make(gt, {b, t, wrong == 4 ? hv + 1 : hv}, 0, in);
      GdnCumsumArgs a;
      a.g = g.view;
      a.cu_seqlens = cu.view;
      a.g_cum = gc.view;
      st = gdn_chunk_cumsum(a, opts);
    } else {
      // Stages 2 .. 5 share k, beta and g_cum; the number of chunks comes from gdn_num_chunks
      // (itself fuzzed here), or raw from the input.
      q = make(dt, {b, t, h, kd}, pad, in);
      k = make(kt, {b, t, h, kd}, in.pick(1) ? 8 : 0, in);
      gc = make(DType::kFloat32, {b, t, hv}, 0, in);
      negate(gc);
      int64_t nc = 0;
      if (!gdn_num_chunks(q.view, cu.view, &nc).ok() || in.pick(7) == 7) nc = in.pick(3);
      if (op == 4) {
        beta = make(bt, {b, t, hv}, 0, in);
        ainv = make(it, {b, t, hv, wrong == 4 ? 65 : kGdnChunk}, in.pick(1) ? 8 : 0, in);
        GdnKktInverseArgs a;
        a.k = k.view;
        a.beta = beta.view;
        a.g_cum = gc.view;
        a.cu_seqlens = cu.view;
        a.a_inv = ainv.view;
        st = gdn_kkt_inverse(a, opts);
      } else if (op == 5) {
        v = make(dt, {b, t, hv, vd}, pad, in);
        beta = make(bt, {b, t, hv}, 0, in);
        ainv = make(it2, {b, t, hv, kGdnChunk}, 0, in);
        w = make(it, {b, t, hv, kd}, pad, in);
        u = make(it, {b, t, hv, vd_o}, 0, in);
        GdnWuArgs a;
        a.k = k.view;
        a.v = v.view;
        a.beta = beta.view;
        a.g_cum = gc.view;
        a.a_inv = ainv.view;
        a.cu_seqlens = cu.view;
        a.w = w.view;
        a.u = u.view;
        st = gdn_wu(a, opts);
      } else if (op == 6) {
        w = make(it, {b, t, hv, kd}, pad, in);
        u = make(it2, {b, t, hv, vd}, 0, in);
        vn = make(it, {b, t, hv, vd_o}, pad, in);
        hh = make(it2, {nc, hv, kd, vd}, in.pick(1) ? 8 : 0, in);
        if (has_init) init = state(n_state, hv, kd, vd, init_layout, pad, in);
        if (has_fin && !alias) fin = state(n, hv, kd, vd, in.pick(1), pad, in);
        GdnStateArgs a;
        a.k = k.view;
        a.w = w.view;
        a.u = u.view;
        a.g_cum = gc.view;
        a.cu_seqlens = cu.view;
        a.initial_state = init.view;
        a.h = hh.view;
        a.v_new = vn.view;
        a.final_state = alias ? init.view : fin.view;
        st = gdn_state_pass(a, opts);
      } else {
        vn = make(it, {b, t, hv, vd}, pad, in);
        hh = make(it2, {nc, hv, kd, vd}, in.pick(1) ? 8 : 0, in);
        o = make(dt, {b, t, hv, vd_o}, pad, in);
        GdnOutputArgs a;
        a.q = q.view;
        a.k = k.view;
        a.v_new = vn.view;
        a.h = hh.view;
        a.g_cum = gc.view;
        a.cu_seqlens = cu.view;
        a.o = o.view;
        a.scale = scale;
        st = gdn_chunk_output(a, opts);
      }
    }
  }
  report(st, kOpNames[op]);
  return 0;
}
