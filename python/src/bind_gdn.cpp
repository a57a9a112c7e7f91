// Gated DeltaNet: the chunked forward, its stages, the recurrent reference and the decode step.
// The Python layer (attnkit/_ops.py) allocates outputs and resolves the stream.
#include <nanobind/stl/string.h>

#include "arrays.h"

namespace attnkit::py {
namespace {

GdnChunkArgs chunk_args(ArrayScope& s, nb::handle q, nb::handle k, nb::handle v, nb::handle g,
                        nb::handle beta, nb::handle cu, nb::handle h0, nb::handle ht, nb::handle o,
                        float scale, bool l2norm, nb::handle slots) {
  GdnChunkArgs a;
  a.q = s.in(q, "q");
  a.k = s.in(k, "k");
  a.v = s.in(v, "v");
  a.g = s.in(g, "g");
  a.beta = s.in(beta, "beta");
  a.cu_seqlens = s.in(cu, "cu_seqlens");
  a.initial_state = s.in(h0, "initial_state");
  a.final_state = s.out(ht, "final_state");
  a.state_indices = s.in(slots, "state_indices");
  a.o = s.out(o, "out");
  a.scale = scale;
  a.use_qk_l2norm = l2norm;
  return a;
}

void chunk_forward(nb::handle q, nb::handle k, nb::handle v, nb::handle g, nb::handle beta,
                   nb::handle cu, nb::handle h0, nb::handle ht, nb::handle o, float scale,
                   bool l2norm, const std::string& backend, uintptr_t stream, bool validate,
                   int threads, nb::handle slots) {
  ArrayScope s;
  const GdnChunkArgs a = chunk_args(s, q, k, v, g, beta, cu, h0, ht, o, scale, l2norm, slots);
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.q.device, [&] { return gdn_chunk_forward(a, opts); });
}

void recurrent_forward(nb::handle q, nb::handle k, nb::handle v, nb::handle g, nb::handle beta,
                       nb::handle cu, nb::handle h0, nb::handle ht, nb::handle o, float scale,
                       bool l2norm, int threads, nb::handle slots) {
  ArrayScope s;
  const GdnChunkArgs a = chunk_args(s, q, k, v, g, beta, cu, h0, ht, o, scale, l2norm, slots);
  const ExecOptions opts = exec_options("auto", 0, false, threads);
  call(a.q.device, [&] { return gdn_recurrent_forward(a, opts); });
}

void cumsum(nb::handle g, nb::handle cu, nb::handle g_cum, const std::string& backend,
            uintptr_t stream, bool validate, int threads) {
  ArrayScope s;
  GdnCumsumArgs a;
  a.g = s.in(g, "g");
  a.cu_seqlens = s.in(cu, "cu_seqlens");
  a.g_cum = s.out(g_cum, "g_cum");
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.g.device, [&] { return gdn_chunk_cumsum(a, opts); });
}

void kkt_inverse(nb::handle k, nb::handle beta, nb::handle g_cum, nb::handle cu, nb::handle a_inv,
                 const std::string& backend, uintptr_t stream, bool validate, int threads) {
  ArrayScope s;
  GdnKktInverseArgs a;
  a.k = s.in(k, "k");
  a.beta = s.in(beta, "beta");
  a.g_cum = s.in(g_cum, "g_cum");
  a.cu_seqlens = s.in(cu, "cu_seqlens");
  a.a_inv = s.out(a_inv, "a_inv");
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.k.device, [&] { return gdn_kkt_inverse(a, opts); });
}

void wu(nb::handle k, nb::handle v, nb::handle beta, nb::handle g_cum, nb::handle a_inv,
        nb::handle cu, nb::handle w, nb::handle u, const std::string& backend, uintptr_t stream,
        bool validate, int threads) {
  ArrayScope s;
  GdnWuArgs a;
  a.k = s.in(k, "k");
  a.v = s.in(v, "v");
  a.beta = s.in(beta, "beta");
  a.g_cum = s.in(g_cum, "g_cum");
  a.a_inv = s.in(a_inv, "a_inv");
  a.cu_seqlens = s.in(cu, "cu_seqlens");
  a.w = s.out(w, "w");
  a.u = s.out(u, "u");
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.k.device, [&] { return gdn_wu(a, opts); });
}

void state_pass(nb::handle k, nb::handle w, nb::handle u, nb::handle g_cum, nb::handle cu,
                nb::handle h0, nb::handle h, nb::handle v_new, nb::handle ht,
                const std::string& backend, uintptr_t stream, bool validate, int threads) {
  ArrayScope s;
  GdnStateArgs a;
  a.k = s.in(k, "k");
  a.w = s.in(w, "w");
  a.u = s.in(u, "u");
  a.g_cum = s.in(g_cum, "g_cum");
  a.cu_seqlens = s.in(cu, "cu_seqlens");
  a.initial_state = s.in(h0, "initial_state");
  a.h = s.out(h, "h");
  a.v_new = s.out(v_new, "v_new");
  a.final_state = s.out(ht, "final_state");
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.k.device, [&] { return gdn_state_pass(a, opts); });
}

void chunk_output(nb::handle q, nb::handle k, nb::handle v_new, nb::handle h, nb::handle g_cum,
                  nb::handle cu, nb::handle o, float scale, const std::string& backend,
                  uintptr_t stream, bool validate, int threads) {
  ArrayScope s;
  GdnOutputArgs a;
  a.q = s.in(q, "q");
  a.k = s.in(k, "k");
  a.v_new = s.in(v_new, "v_new");
  a.h = s.in(h, "h");
  a.g_cum = s.in(g_cum, "g_cum");
  a.cu_seqlens = s.in(cu, "cu_seqlens");
  a.o = s.out(o, "out");
  a.scale = scale;
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.q.device, [&] { return gdn_chunk_output(a, opts); });
}

int64_t num_chunks(nb::handle q, nb::handle cu) {
  ArrayScope s;
  const TensorView qv = s.in(q, "q"), cuv = s.in(cu, "cu_seqlens");
  int64_t n = 0;
  throw_if_error(gdn_num_chunks(qv, cuv, &n));
  return n;
}

void decode_step(nb::handle q, nb::handle k, nb::handle v, nb::handle g, nb::handle beta,
                 nb::handle pool, nb::handle indices, nb::handle o, float scale, bool l2norm,
                 const std::string& backend, uintptr_t stream, bool validate, int threads,
                 nb::handle a_log, nb::handle a_in, nb::handle dt_bias, nb::handle b_in,
                 nb::handle step_states, bool update_pool) {
  ArrayScope s;
  GdnDecodeArgs a;
  a.q = s.in(q, "q");
  a.k = s.in(k, "k");
  a.v = s.in(v, "v");
  a.g = s.in(g, "g");
  a.beta = s.in(beta, "beta");
  a.state_pool = s.out(pool, "state_pool");
  a.state_indices = s.in(indices, "state_indices");
  a.o = s.out(o, "out");
  a.A_log = s.in(a_log, "A_log");
  a.a = s.in(a_in, "a");
  a.dt_bias = s.in(dt_bias, "dt_bias");
  a.b = s.in(b_in, "b");
  a.step_states = s.out(step_states, "step_states");
  a.update_pool = update_pool;
  a.scale = scale;
  a.use_qk_l2norm = l2norm;
  const ExecOptions opts = exec_options(backend, stream, validate, threads);
  call(a.q.device, [&] { return gdn_decode_step(a, opts); });
}

}  // namespace

void bind_gdn(nb::module_& m) {
  using nb::arg;
  m.def("gdn_chunk_forward", &chunk_forward, arg("q"), arg("k"), arg("v"), arg("g"), arg("beta"),
        arg("cu_seqlens").none(), arg("initial_state").none(), arg("final_state").none(),
        arg("out"), arg("scale"), arg("use_qk_l2norm"), arg("backend"), arg("stream"),
        arg("validate_indices"), arg("cpu_threads"), arg("state_indices").none() = nb::none());
  m.def("gdn_recurrent_forward", &recurrent_forward, arg("q"), arg("k"), arg("v"), arg("g"),
        arg("beta"), arg("cu_seqlens").none(), arg("initial_state").none(),
        arg("final_state").none(), arg("out"), arg("scale"), arg("use_qk_l2norm"),
        arg("cpu_threads"), arg("state_indices").none() = nb::none());
  m.def("gdn_chunk_cumsum", &cumsum, arg("g"), arg("cu_seqlens").none(), arg("g_cum"),
        arg("backend"), arg("stream"), arg("validate_indices"), arg("cpu_threads"));
  m.def("gdn_kkt_inverse", &kkt_inverse, arg("k"), arg("beta"), arg("g_cum"),
        arg("cu_seqlens").none(), arg("a_inv"), arg("backend"), arg("stream"),
        arg("validate_indices"), arg("cpu_threads"));
  m.def("gdn_wu", &wu, arg("k"), arg("v"), arg("beta"), arg("g_cum"), arg("a_inv"),
        arg("cu_seqlens").none(), arg("w"), arg("u"), arg("backend"), arg("stream"),
        arg("validate_indices"), arg("cpu_threads"));
  m.def("gdn_state_pass", &state_pass, arg("k"), arg("w"), arg("u"), arg("g_cum"),
        arg("cu_seqlens").none(), arg("initial_state").none(), arg("h"), arg("v_new"),
        arg("final_state").none(), arg("backend"), arg("stream"), arg("validate_indices"),
        arg("cpu_threads"));
  m.def("gdn_chunk_output", &chunk_output, arg("q"), arg("k"), arg("v_new"), arg("h"),
        arg("g_cum"), arg("cu_seqlens").none(), arg("out"), arg("scale"), arg("backend"),
        arg("stream"), arg("validate_indices"), arg("cpu_threads"));
  m.def("gdn_num_chunks", &num_chunks, arg("q"), arg("cu_seqlens").none());
  m.def("gdn_decode_step", &decode_step, arg("q"), arg("k"), arg("v"), arg("g").none(),
        arg("beta").none(), arg("state_pool"), arg("state_indices"), arg("out"), arg("scale"),
        arg("use_qk_l2norm"), arg("backend"), arg("stream"), arg("validate_indices"),
        arg("cpu_threads"), arg("A_log").none() = nb::none(), arg("a").none() = nb::none(),
        arg("dt_bias").none() = nb::none(), arg("b").none() = nb::none(),
        arg("step_states").none() = nb::none(), arg("update_pool") = true);
}

}  // namespace attnkit::py
