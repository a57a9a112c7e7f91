// attention_forward (with the plan/run split), merge_states, append_kv_cache and quantize_fp8.
// The Python layer (attnkit/_ops.py) allocates outputs and resolves the stream; these functions
// only translate and call.
#include <nanobind/stl/string.h>

#include "arrays.h"

namespace attnkit::py {
namespace {

// The AttentionArgs of one call, its arrays imported into `s`.
AttentionArgs attention_args(ArrayScope& s, nb::handle q, nb::handle k, nb::handle v, nb::handle o,
                             nb::handle lse, nb::handle cu_q, nb::handle cu_k,
                             nb::handle page_table, nb::handle seqused_k, nb::handle alibi,
                             nb::handle sinks, nb::handle q_scale, nb::handle k_scale,
                             nb::handle v_scale, int max_q,
                             int max_k, float scale, int wl, int wr,
                             int chunk, float softcap, int splits) {
  AttentionArgs a;
  a.q = s.in(q, "q");
  a.k = s.in(k, "k");
  a.v = s.in(v, "v");
  a.o = s.out(o, "out");
  a.lse = s.out(lse, "lse");
  a.cu_seqlens_q = s.in(cu_q, "cu_seqlens_q");
  a.cu_seqlens_k = s.in(cu_k, "cu_seqlens_k");
  a.page_table = s.in(page_table, "page_table");
  a.seqused_k = s.in(seqused_k, "seqused_k");
  a.alibi_slopes = s.in(alibi, "alibi_slopes");
  a.sinks = s.in(sinks, "sinks");
  a.q_scale = s.in(q_scale, "q_scale");
  a.k_scale = s.in(k_scale, "k_scale");
  a.v_scale = s.in(v_scale, "v_scale");
  a.max_seqlen_q = max_q;
  a.max_seqlen_k = max_k;
  a.scale = scale;
  a.mask = Mask{wl, wr, chunk};
  a.softcap = softcap;
  a.num_splits = splits;
  return a;
}

AttentionPlan plan(nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse,
                   nb::handle cu_q, nb::handle cu_k, nb::handle page_table, nb::handle seqused_k,
                   nb::handle alibi, nb::handle sinks, nb::handle q_scale, nb::handle k_scale,
                   nb::handle v_scale, int max_q, int max_k, float scale, int wl, int wr,
                   int chunk, float softcap, int splits, const std::string& backend,
                   uintptr_t stream, bool validate_indices, int cpu_threads) {
  ArrayScope s;
  const AttentionArgs a =
      attention_args(s, q, k, v, o, lse, cu_q, cu_k, page_table, seqused_k, alibi, sinks, q_scale,
                     k_scale, v_scale, max_q, max_k, scale, wl, wr, chunk, softcap, splits);
  const ExecOptions opts = exec_options(backend, stream, validate_indices, cpu_threads);
  AttentionPlan p;
  throw_if_error(plan_attention(a, opts, &p));
  return p;
}

void forward(nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse,
             nb::handle cu_q, nb::handle cu_k, nb::handle page_table, nb::handle seqused_k,
             nb::handle alibi, nb::handle sinks, nb::handle q_scale, nb::handle k_scale,
             nb::handle v_scale, int max_q, int max_k, float scale, int wl, int wr, int chunk,
             float softcap, int splits, const std::string& backend, uintptr_t stream,
             bool validate_indices, int cpu_threads, const AttentionPlan* plan) {
  ArrayScope s;
  const AttentionArgs a =
      attention_args(s, q, k, v, o, lse, cu_q, cu_k, page_table, seqused_k, alibi, sinks, q_scale,
                     k_scale, v_scale, max_q, max_k, scale, wl, wr, chunk, softcap, splits);
  const ExecOptions opts = exec_options(backend, stream, validate_indices, cpu_threads);
  call(a.q.device, [&] { return attention_forward(a, opts, plan); });
}

void merge(nb::handle o_parts, nb::handle lse_parts, nb::handle o, nb::handle lse,
           const std::string& backend, uintptr_t stream, int cpu_threads) {
  ArrayScope s;
  MergeStatesArgs a;
  a.o_parts = s.in(o_parts, "o_parts");
  a.lse_parts = s.in(lse_parts, "lse_parts");
  a.o = s.out(o, "out");
  a.lse = s.out(lse, "lse");
  const ExecOptions opts = exec_options(backend, stream, false, cpu_threads);
  call(a.o_parts.device, [&] { return merge_states(a, opts); });
}

void append_kv(nb::handle k, nb::handle v, nb::handle k_cache, nb::handle v_cache,
               nb::handle slot_mapping, nb::handle k_scale, nb::handle v_scale,
               const std::string& backend, uintptr_t stream, bool validate_indices) {
  ArrayScope s;
  AppendKvArgs a;
  a.k = s.in(k, "k");
  a.v = s.in(v, "v");
  a.k_cache = s.out(k_cache, "k_cache");
  a.v_cache = s.out(v_cache, "v_cache");
  a.slot_mapping = s.in(slot_mapping, "slot_mapping");
  a.k_scale = s.out(k_scale, "k_scale");  // written for per-token scales
  a.v_scale = s.out(v_scale, "v_scale");
  const ExecOptions opts = exec_options(backend, stream, validate_indices, 0);
  call(a.k.device, [&] { return append_kv_cache(a, opts); });
}

void quantize(nb::handle x, nb::handle out, nb::handle scale, const std::string& backend,
              uintptr_t stream) {
  ArrayScope s;
  QuantizeFp8Args a;
  a.x = s.in(x, "x");
  a.out = s.out(out, "out");
  a.scale = s.out(scale, "scale");
  const ExecOptions opts = exec_options(backend, stream, false, 0);
  call(a.x.device, [&] { return quantize_fp8(a, opts); });
}

std::string plan_repr(const AttentionPlan& p) {
  return "Plan(backend='" + std::string(to_string(p.backend)) + "', kernel='" + p.kernel +
         "', num_splits=" + std::to_string(p.num_splits) +
         ", workspace_bytes=" + std::to_string(p.workspace_bytes) + ")";
}

}  // namespace

void bind_attention(nb::module_& m) {
  nb::class_<AttentionPlan>(m, "Plan",
                            "What an attention call runs, computed once on the host; reusable for "
                            "calls with the same shapes and options, also under CUDA graph capture.")
      .def_prop_ro("backend", [](const AttentionPlan& p) { return std::string(to_string(p.backend)); })
      .def_ro("kernel", &AttentionPlan::kernel)
      .def_ro("num_splits", &AttentionPlan::num_splits)
      .def_ro("workspace_bytes", &AttentionPlan::workspace_bytes)
      .def("__repr__", &plan_repr);

  m.def("plan_attention", &plan, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"),
        nb::arg("lse").none(), nb::arg("cu_seqlens_q").none(), nb::arg("cu_seqlens_k").none(),
        nb::arg("page_table").none(), nb::arg("seqused_k").none(), nb::arg("alibi_slopes").none(),
        nb::arg("sinks").none(), nb::arg("q_scale").none(), nb::arg("k_scale").none(),
        nb::arg("v_scale").none(), nb::arg("max_seqlen_q"), nb::arg("max_seqlen_k"),
        nb::arg("scale"), nb::arg("window_left"), nb::arg("window_right"),
        nb::arg("chunk_size"), nb::arg("softcap"), nb::arg("num_splits"), nb::arg("backend"),
        nb::arg("stream"), nb::arg("validate_indices"), nb::arg("cpu_threads"));
  m.def("attention_forward", &forward, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"),
        nb::arg("lse").none(), nb::arg("cu_seqlens_q").none(), nb::arg("cu_seqlens_k").none(),
        nb::arg("page_table").none(), nb::arg("seqused_k").none(), nb::arg("alibi_slopes").none(),
        nb::arg("sinks").none(), nb::arg("q_scale").none(), nb::arg("k_scale").none(),
        nb::arg("v_scale").none(), nb::arg("max_seqlen_q"), nb::arg("max_seqlen_k"),
        nb::arg("scale"), nb::arg("window_left"), nb::arg("window_right"),
        nb::arg("chunk_size"), nb::arg("softcap"), nb::arg("num_splits"), nb::arg("backend"),
        nb::arg("stream"), nb::arg("validate_indices"), nb::arg("cpu_threads"),
        nb::arg("plan").none());
  m.def("append_kv_cache", &append_kv, nb::arg("k"), nb::arg("v").none(), nb::arg("k_cache"),
        nb::arg("v_cache").none(), nb::arg("slot_mapping"), nb::arg("k_scale").none(),
        nb::arg("v_scale").none(), nb::arg("backend"), nb::arg("stream"),
        nb::arg("validate_indices"));
  m.def("quantize_fp8", &quantize, nb::arg("x"), nb::arg("out"), nb::arg("scale"),
        nb::arg("backend"), nb::arg("stream"));
  m.def("merge_states", &merge, nb::arg("o_parts"), nb::arg("lse_parts"), nb::arg("out"),
        nb::arg("lse").none(), nb::arg("backend"), nb::arg("stream"), nb::arg("cpu_threads"));
}

}  // namespace attnkit::py
