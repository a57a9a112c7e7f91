// Argument validation for every Gated DeltaNet op. Runs before any data is touched; every error
// names the argument at fault. Shapes are checked before index tensors are read.
#include <algorithm>
#include <cmath>
#include <string>

#include "api/check.h"
#include "api/gdn_problem.h"

namespace attnkit::detail {
namespace {

constexpr std::initializer_list<DType> kTokenTypes = {DType::kBFloat16, DType::kFloat16,
                                                      DType::kFloat32};
// Intermediates of the chunked pipeline (a_inv, w, u, h, v_new).
constexpr std::initializer_list<DType> kInterTypes = {DType::kFloat32, DType::kBFloat16};

std::string num(int64_t v) { return std::to_string(v); }

// Appends what the expected shape means to a shape error.
Status with_hint(Status s, const char* hint) {
  if (s.ok()) return s;
  return Status(s.code(), s.message() + " " + hint);
}

// Which dimension must be contiguous: the last, or either of the last two. The second is for
// states (initial / final, the decode pool): a key-last [.., V, K] state, the layout vLLM, SGLang
// and FlashInfer keep, arrives as its transposed [.., K, V] view.
enum class Inner { kLast, kLastTwo };

std::string strides_str(const TensorView& t) {
  std::string r = "(";
  for (int i = 0; i < t.ndim; ++i) r += (i ? ", " : "") + num(t.stride[i]);
  return r + ")";
}

Status require_inner(const TensorView& t, const char* name, Inner inner) {
  if (inner == Inner::kLast) return require_last_dim_contiguous(t, name);
  const int d = t.ndim - 1;
  const bool last = t.stride[d] == 1 || t.shape[d] == 1;
  const bool second = t.stride[d - 1] == 1 || t.shape[d - 1] == 1;
  if (last || second) return Status::Ok();
  return Status::Invalid(std::string(name) + " must be contiguous in its V dimension ([.., K, V]) "
                         "or in its K dimension (a key-last [.., V, K] state passed transposed); "
                         "its strides are " + strides_str(t));
}

Status check_layout(const TensorView& t, const char* name, const Device& dev,
                    Inner inner = Inner::kLast) {
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_inner(t, name, inner));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(t, name, dev));
  return require_data(t, name);
}

// A float tensor with a fixed shape (-1 = any) and one of `dtypes`.
Status check_tensor(const TensorView& t, const char* name, const Device& dev,
                    std::initializer_list<DType> dtypes, const std::vector<int64_t>& shape,
                    const std::string& hint, Inner inner = Inner::kLast) {
  ATTNKIT_RETURN_IF_ERROR(require_defined(t, name));
  ATTNKIT_RETURN_IF_ERROR(with_hint(require_shape(t, name, shape), hint.c_str()));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(t, name, dtypes));
  return check_layout(t, name, dev, inner);
}
Status check_tensor(const TensorView& t, const char* name, const Device& dev,
                    std::initializer_list<DType> dtypes, std::initializer_list<int64_t> shape,
                    const char* hint, Inner inner = Inner::kLast) {
  return check_tensor(t, name, dev, dtypes, std::vector<int64_t>(shape), hint, inner);
}

// Optional fp32 [N, HV, K, V] state.
Status check_state(const TensorView& t, const char* name, const GdnProblem& p) {
  if (!t.defined()) return Status::Ok();
  return check_tensor(t, name, p.device, {DType::kFloat32}, {p.N, p.HV, p.K, p.V},
                      "([N, HV, K, V], one state per sequence)", Inner::kLastTwo);
}

// An fp32 state pool [P, HV, K, V] (any P), or none.
Status check_pool(const TensorView& t, const char* name, const Device& dev, int64_t HV, int64_t K,
                  int64_t V) {
  if (!t.defined()) return Status::Ok();
  return check_tensor(t, name, dev, {DType::kFloat32}, {-1, HV, K, V},
                      "([P, HV, K, V], a pool of states)", Inner::kLastTwo);
}

// int32 [n] pool slots: read into `slots`, each -1 (padding) or inside [0, P), none repeated.
Status read_slots(const TensorView& idx, const char* name, int64_t n, int64_t P,
                  const char* pool, const ExecOptions& opts, std::vector<int32_t>* slots) {
  ATTNKIT_RETURN_IF_ERROR(read_int32(idx, name, opts.stream, slots));
  // Two sequences sharing a slot would race on it (and the result would depend on the order).
  // Sorted (slot, sequence) pairs find a repeat in O(n log n), whatever the pool's size.
  std::vector<std::pair<int32_t, int64_t>> by_slot;
  by_slot.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t s = (*slots)[i];
    if (s == -1) continue;
    if (s < 0 || s >= P)
      return Status::Invalid(std::string(name) + "[" + num(i) + "] = " + num(s) +
                             " is outside [0, " + num(P) + ") (" + pool +
                             " slots) and is not -1 (padding)");
    by_slot.emplace_back(s, i);
  }
  std::sort(by_slot.begin(), by_slot.end());
  for (size_t i = 1; i < by_slot.size(); ++i)
    if (by_slot[i].first == by_slot[i - 1].first)
      return Status::Invalid(std::string(name) + "[" + num(by_slot[i].second) + "] = " +
                             num(by_slot[i].first) + " repeats " + name + "[" +
                             num(by_slot[i - 1].second) + "]: each sequence needs its own slot");
  return Status::Ok();
}

// The forward's initial / final states: one per sequence, or pool rows picked by state_indices.
Status check_states(const GdnChunkArgs& a, const ExecOptions& opts, GdnProblem* p) {
  p->has_initial_state = a.initial_state.defined();
  p->has_final_state = a.final_state.defined();
  if (!a.state_indices.defined()) {
    ATTNKIT_RETURN_IF_ERROR(check_state(a.initial_state, "initial_state", *p));
    return check_state(a.final_state, "final_state", *p);
  }
  if (!p->has_initial_state && !p->has_final_state)
    return Status::Invalid("state_indices picks rows of initial_state / final_state pools; give "
                           "at least one of them");
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.state_indices, "state_indices", {DType::kInt32}));
  ATTNKIT_RETURN_IF_ERROR(require_shape(a.state_indices, "state_indices", {p->N}));
  ATTNKIT_RETURN_IF_ERROR(check_layout(a.state_indices, "state_indices", p->device));
  for (auto [t, n] :
       {std::pair{&a.initial_state, "initial_state"}, {&a.final_state, "final_state"}})
    ATTNKIT_RETURN_IF_ERROR(check_pool(*t, n, p->device, p->HV, p->K, p->V));
  p->state_slots = true;
  if (p->device.type != DeviceType::kCPU && !opts.validate_device_indices) return Status::Ok();
  int64_t P = INT64_MAX;
  for (const TensorView* t : {&a.initial_state, &a.final_state})
    if (t->defined()) P = std::min(P, t->shape[0]);
  const char* pool = p->has_initial_state && p->has_final_state ? "initial_state and final_state"
                     : p->has_initial_state                     ? "initial_state"
                                                                : "final_state";
  return read_slots(a.state_indices, "state_indices", p->N, P, pool, opts, &p->slots);
}

Status check_heads(GdnProblem* p, const char* qk_name, const char* v_name) {
  if (p->H < 1) return Status::Invalid(std::string(qk_name) + " must have at least one head");
  if (p->HV < 1) return Status::Invalid(std::string(v_name) + " must have at least one head");
  if (p->HV % p->H != 0)
    return Status::Invalid("value heads HV = " + num(p->HV) + " (" + v_name +
                           ") must be a multiple of q/k heads H = " + num(p->H) + " (" + qk_name +
                           ")");
  return Status::Ok();
}

Status check_head_size(int64_t d, const char* what) {
  if (d < 1 || d > kGdnCpuMaxHeadDim)
    return Status::Unsupported(std::string(what) + " = " + num(d) +
                               " is not supported (1 .. " + num(kGdnCpuMaxHeadDim) + ")");
  return Status::Ok();
}

Status check_scale(float scale, int64_t K, GdnProblem* p) {
  if (!std::isfinite(scale)) return Status::Invalid("scale must be finite (0 = K^-1/2)");
  p->scale = scale != 0.f ? scale : 1.f / std::sqrt(static_cast<float>(K));
  return Status::Ok();
}

// Takes B and T from the token tensor `base` (already shape-checked to rank >= 2) and the number of
// sequences from cu_seqlens' size. Reads nothing.
Status init_layout(const TensorView& base, const char* base_name, const TensorView& cu,
                   GdnProblem* p) {
  p->device = base.device;
  p->B = base.shape[0];
  p->T = base.shape[1];
  p->varlen = cu.defined();
  if (!p->varlen) {
    p->N = p->B;
    return Status::Ok();
  }
  ATTNKIT_RETURN_IF_ERROR(require_dtype(cu, "cu_seqlens", {DType::kInt32}));
  ATTNKIT_RETURN_IF_ERROR(require_rank(cu, "cu_seqlens", 1));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(cu, "cu_seqlens"));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(cu, "cu_seqlens", p->device));
  ATTNKIT_RETURN_IF_ERROR(require_data(cu, "cu_seqlens"));
  if (cu.shape[0] < 1) return Status::Invalid("cu_seqlens must have N+1 >= 1 entries");
  if (p->B != 1)
    return Status::Invalid("cu_seqlens needs a ragged batch with B = 1, but " +
                           std::string(base_name) + " has B = " + num(p->B));
  p->N = cu.shape[0] - 1;
  return Status::Ok();
}

// Reads cu_seqlens when the host may, checks it, and derives sequences and chunk offsets.
Status read_layout(const TensorView& cu, const ExecOptions& opts, GdnProblem* p) {
  p->indices_on_host =
      !p->varlen || p->device.type == DeviceType::kCPU || opts.validate_device_indices;
  if (!p->indices_on_host) {
    p->num_chunks = -1;
    return Status::Ok();
  }
  if (p->varlen) {
    ATTNKIT_RETURN_IF_ERROR(read_int32(cu, "cu_seqlens", opts.stream, &p->cu_seqlens));
    ATTNKIT_RETURN_IF_ERROR(check_cu_seqlens(p->cu_seqlens, "cu_seqlens", p->T));
  }
  p->seq_start.resize(p->N);
  p->seq_len.resize(p->N);
  p->chunk_offsets.assign(p->N + 1, 0);
  for (int64_t n = 0; n < p->N; ++n) {
    p->seq_start[n] = p->varlen ? p->cu_seqlens[n] : 0;
    p->seq_len[n] = p->varlen ? p->cu_seqlens[n + 1] - p->cu_seqlens[n] : p->T;
    p->chunk_offsets[n + 1] = p->chunk_offsets[n] + (p->seq_len[n] + kGdnChunk - 1) / kGdnChunk;
  }
  p->num_chunks = p->chunk_offsets[p->N];
  return Status::Ok();
}

// h: [num_chunks, HV, K, V]. Without host indices the first dim is taken as given.
Status check_h(const TensorView& h, GdnProblem* p) {
  ATTNKIT_RETURN_IF_ERROR(require_defined(h, "h"));
  if (!p->indices_on_host) {
    ATTNKIT_RETURN_IF_ERROR(require_rank(h, "h", 4));
    p->num_chunks = h.shape[0];
  }
  return check_tensor(h, "h", p->device, kInterTypes, {p->num_chunks, p->HV, p->K, p->V},
                      "([num_chunks, HV, K, V], the state entering each 64-token chunk)");
}

// The first token tensor of an op: fixes device, B, T and the sequence count.
Status check_base(const TensorView& t, const char* name, std::initializer_list<DType> dtypes,
                  int rank, const TensorView& cu, GdnProblem* p) {
  ATTNKIT_RETURN_IF_ERROR(require_defined(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_rank(t, name, rank));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(t, name, dtypes));
  ATTNKIT_RETURN_IF_ERROR(check_layout(t, name, t.device));
  return init_layout(t, name, cu, p);
}

Status check_beta(const TensorView& beta, const GdnProblem& p) {
  return check_tensor(beta, "beta", p.device, {DType::kFloat32, p.dtype}, {p.B, p.T, p.HV},
                      "([B, T, HV])");
}

Status check_gate(const TensorView& g, const char* name, const GdnProblem& p) {
  return check_tensor(g, name, p.device, {DType::kFloat32}, {p.B, p.T, p.HV}, "([B, T, HV])");
}

}  // namespace

Status validate_gdn_chunk(const GdnChunkArgs& a, const ExecOptions& opts, GdnProblem* p) {
  *p = GdnProblem{};
  ATTNKIT_RETURN_IF_ERROR(check_base(a.q, "q", kTokenTypes, 4, a.cu_seqlens, p));
  p->dtype = a.q.dtype;
  p->H = a.q.shape[2];
  p->K = a.q.shape[3];
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.k, "k", p->device, {p->dtype}, {p->B, p->T, p->H, p->K}, "(like q)"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.v, "v"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.v, "v", 4));
  p->HV = a.v.shape[2];
  p->V = a.v.shape[3];
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.v, "v", p->device, {p->dtype}, {p->B, p->T, -1, -1}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_heads(p, "q", "v"));
  ATTNKIT_RETURN_IF_ERROR(check_gate(a.g, "g", *p));
  ATTNKIT_RETURN_IF_ERROR(check_beta(a.beta, *p));
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.o, "o", p->device, {p->dtype}, {p->B, p->T, p->HV, p->V}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->K, "q/k head size K"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->V, "v head size V"));
  ATTNKIT_RETURN_IF_ERROR(check_states(a, opts, p));
  p->use_qk_l2norm = a.use_qk_l2norm;
  ATTNKIT_RETURN_IF_ERROR(check_scale(a.scale, p->K, p));
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart(
      {{&a.o, "o"}, {&a.final_state, "final_state"}},
      {{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.g, "g"}, {&a.beta, "beta"},
       {&a.cu_seqlens, "cu_seqlens"}, {&a.initial_state, "initial_state"},
       {&a.state_indices, "state_indices"}},
      {{&a.final_state, &a.initial_state}}));
  return read_layout(a.cu_seqlens, opts, p);
}

Status validate_gdn_cumsum(const GdnCumsumArgs& a, const ExecOptions& opts, GdnProblem* p) {
  *p = GdnProblem{};
  ATTNKIT_RETURN_IF_ERROR(check_base(a.g, "g", {DType::kFloat32}, 3, a.cu_seqlens, p));
  p->dtype = DType::kFloat32;
  p->HV = a.g.shape[2];
  if (p->HV < 1) return Status::Invalid("g must have at least one value head");
  ATTNKIT_RETURN_IF_ERROR(check_gate(a.g_cum, "g_cum", *p));
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart({{&a.g_cum, "g_cum"}},
                                                {{&a.g, "g"}, {&a.cu_seqlens, "cu_seqlens"}}));
  return read_layout(a.cu_seqlens, opts, p);
}

Status validate_gdn_kkt_inverse(const GdnKktInverseArgs& a, const ExecOptions& opts,
                                GdnProblem* p) {
  *p = GdnProblem{};
  ATTNKIT_RETURN_IF_ERROR(check_base(a.k, "k", kTokenTypes, 4, a.cu_seqlens, p));
  p->dtype = a.k.dtype;
  p->H = a.k.shape[2];
  p->K = a.k.shape[3];
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.beta, "beta"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.beta, "beta", 3));
  p->HV = a.beta.shape[2];
  ATTNKIT_RETURN_IF_ERROR(check_heads(p, "k", "beta"));
  ATTNKIT_RETURN_IF_ERROR(check_beta(a.beta, *p));
  ATTNKIT_RETURN_IF_ERROR(check_gate(a.g_cum, "g_cum", *p));
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.a_inv, "a_inv", p->device, kInterTypes,
                                       {p->B, p->T, p->HV, kGdnChunk},
                                       "([B, T, HV, 64], one row of its chunk's inverse per token)"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->K, "k head size K"));
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart(
      {{&a.a_inv, "a_inv"}},
      {{&a.k, "k"}, {&a.beta, "beta"}, {&a.g_cum, "g_cum"}, {&a.cu_seqlens, "cu_seqlens"}}));
  return read_layout(a.cu_seqlens, opts, p);
}

Status validate_gdn_wu(const GdnWuArgs& a, const ExecOptions& opts, GdnProblem* p) {
  *p = GdnProblem{};
  ATTNKIT_RETURN_IF_ERROR(check_base(a.k, "k", kTokenTypes, 4, a.cu_seqlens, p));
  p->dtype = a.k.dtype;
  p->H = a.k.shape[2];
  p->K = a.k.shape[3];
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.v, "v"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.v, "v", 4));
  p->HV = a.v.shape[2];
  p->V = a.v.shape[3];
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.v, "v", p->device, {p->dtype}, {p->B, p->T, -1, -1}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_heads(p, "k", "v"));
  ATTNKIT_RETURN_IF_ERROR(check_beta(a.beta, *p));
  ATTNKIT_RETURN_IF_ERROR(check_gate(a.g_cum, "g_cum", *p));
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.a_inv, "a_inv", p->device, kInterTypes,
                                       {p->B, p->T, p->HV, kGdnChunk}, "([B, T, HV, 64])"));
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.w, "w", p->device, kInterTypes,
                                       {p->B, p->T, p->HV, p->K}, "([B, T, HV, K])"));
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.u, "u", p->device, kInterTypes,
                                       {p->B, p->T, p->HV, p->V}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->K, "k head size K"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->V, "v head size V"));
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart(
      {{&a.w, "w"}, {&a.u, "u"}},
      {{&a.k, "k"}, {&a.v, "v"}, {&a.beta, "beta"}, {&a.g_cum, "g_cum"}, {&a.a_inv, "a_inv"},
       {&a.cu_seqlens, "cu_seqlens"}}));
  return read_layout(a.cu_seqlens, opts, p);
}

Status validate_gdn_state_pass(const GdnStateArgs& a, const ExecOptions& opts, GdnProblem* p) {
  *p = GdnProblem{};
  ATTNKIT_RETURN_IF_ERROR(check_base(a.k, "k", kTokenTypes, 4, a.cu_seqlens, p));
  p->dtype = a.k.dtype;
  p->H = a.k.shape[2];
  p->K = a.k.shape[3];
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.u, "u"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.u, "u", 4));
  p->HV = a.u.shape[2];
  p->V = a.u.shape[3];
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.u, "u", p->device, kInterTypes, {p->B, p->T, -1, -1},
                                       "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_heads(p, "k", "u"));
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.w, "w", p->device, kInterTypes,
                                       {p->B, p->T, p->HV, p->K}, "([B, T, HV, K])"));
  ATTNKIT_RETURN_IF_ERROR(check_gate(a.g_cum, "g_cum", *p));
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.v_new, "v_new", p->device, kInterTypes,
                                       {p->B, p->T, p->HV, p->V}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->K, "k head size K"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->V, "u head size V"));
  ATTNKIT_RETURN_IF_ERROR(check_state(a.initial_state, "initial_state", *p));
  ATTNKIT_RETURN_IF_ERROR(check_state(a.final_state, "final_state", *p));
  p->has_initial_state = a.initial_state.defined();
  p->has_final_state = a.final_state.defined();
  ATTNKIT_RETURN_IF_ERROR(read_layout(a.cu_seqlens, opts, p));
  ATTNKIT_RETURN_IF_ERROR(check_h(a.h, p));
  return require_outputs_apart(
      {{&a.h, "h"}, {&a.v_new, "v_new"}, {&a.final_state, "final_state"}},
      {{&a.k, "k"}, {&a.w, "w"}, {&a.u, "u"}, {&a.g_cum, "g_cum"}, {&a.cu_seqlens, "cu_seqlens"},
       {&a.initial_state, "initial_state"}},
      {{&a.final_state, &a.initial_state}});
}

Status validate_gdn_output(const GdnOutputArgs& a, const ExecOptions& opts, GdnProblem* p) {
  *p = GdnProblem{};
  ATTNKIT_RETURN_IF_ERROR(check_base(a.q, "q", kTokenTypes, 4, a.cu_seqlens, p));
  p->dtype = a.q.dtype;
  p->H = a.q.shape[2];
  p->K = a.q.shape[3];
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.k, "k", p->device, {p->dtype}, {p->B, p->T, p->H, p->K}, "(like q)"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.v_new, "v_new"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.v_new, "v_new", 4));
  p->HV = a.v_new.shape[2];
  p->V = a.v_new.shape[3];
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.v_new, "v_new", p->device, kInterTypes,
                                       {p->B, p->T, -1, -1}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_heads(p, "q", "v_new"));
  ATTNKIT_RETURN_IF_ERROR(check_gate(a.g_cum, "g_cum", *p));
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.o, "o", p->device, {p->dtype}, {p->B, p->T, p->HV, p->V}, "([B, T, HV, V])"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->K, "q/k head size K"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->V, "v_new head size V"));
  ATTNKIT_RETURN_IF_ERROR(check_scale(a.scale, p->K, p));
  ATTNKIT_RETURN_IF_ERROR(read_layout(a.cu_seqlens, opts, p));
  ATTNKIT_RETURN_IF_ERROR(check_h(a.h, p));
  return require_outputs_apart({{&a.o, "o"}},
                               {{&a.q, "q"}, {&a.k, "k"}, {&a.v_new, "v_new"}, {&a.h, "h"},
                                {&a.g_cum, "g_cum"}, {&a.cu_seqlens, "cu_seqlens"}});
}

Status validate_gdn_decode(const GdnDecodeArgs& a, const ExecOptions& opts, GdnDecodeProblem* p) {
  *p = GdnDecodeProblem{};
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.q, "q"));
  if (a.q.ndim != 3 && a.q.ndim != 4)
    return Status::Invalid("q must be [N, H, K] (one token per sequence) or [N, T, H, K] (T tokens "
                           "per sequence), got " + shape_str(a.q));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.q, "q", kTokenTypes));
  const Device dev = a.q.device;
  ATTNKIT_RETURN_IF_ERROR(check_layout(a.q, "q", dev));
  p->device = dev;
  p->dtype = a.q.dtype;
  p->multi_token = a.q.ndim == 4;
  p->N = a.q.shape[0];
  p->T = p->multi_token ? a.q.shape[1] : 1;
  p->H = a.q.size(-2);
  p->K = a.q.size(-1);
  // A per-token tensor's shape and its hint: [N, (T,) rest...].
  auto tok = [&](std::initializer_list<int64_t> rest) {
    std::vector<int64_t> d{p->N};
    if (p->multi_token) d.push_back(p->T);
    d.insert(d.end(), rest);
    return d;
  };
  auto hint = [&](const char* rest) {
    return std::string(p->multi_token ? "([N, T, " : "([N, ") + rest + "])";
  };
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.k, "k", dev, {p->dtype}, tok({p->H, p->K}), "(like q)"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.v, "v"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.v, "v", a.q.ndim));
  p->HV = a.v.size(-2);
  p->V = a.v.size(-1);
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.v, "v", dev, {p->dtype}, tok({-1, -1}), hint("HV, V")));
  if (p->H < 1) return Status::Invalid("q must have at least one head");
  if (p->HV < 1) return Status::Invalid("v must have at least one head");
  if (p->HV % p->H != 0)
    return Status::Invalid("value heads HV = " + num(p->HV) +
                           " (v) must be a multiple of q/k heads H = " + num(p->H) + " (q)");
  const bool fused = a.A_log.defined() || a.a.defined() || a.dt_bias.defined() || a.b.defined();
  p->fused_gating = fused;
  if (fused) {  // the gates from the layer's parameters (gdn.h), all four and no g / beta
    if (a.g.defined() || a.beta.defined())
      return Status::Invalid("give either g and beta, or A_log, a, dt_bias and b (fused gating), "
                             "not both");
    ATTNKIT_RETURN_IF_ERROR(
        check_tensor(a.A_log, "A_log", dev, {DType::kFloat32}, {p->HV}, "([HV])"));
    ATTNKIT_RETURN_IF_ERROR(
        check_tensor(a.dt_bias, "dt_bias", dev, {DType::kFloat32}, {p->HV}, "([HV])"));
    ATTNKIT_RETURN_IF_ERROR(
        check_tensor(a.a, "a", dev, {DType::kFloat32, p->dtype}, tok({p->HV}), hint("HV")));
    ATTNKIT_RETURN_IF_ERROR(check_tensor(a.b, "b", dev, {a.a.dtype}, tok({p->HV}),
                                         hint("HV") + ", a's dtype"));
  } else {
    ATTNKIT_RETURN_IF_ERROR(
        check_tensor(a.g, "g", dev, {DType::kFloat32}, tok({p->HV}), hint("HV")));
    ATTNKIT_RETURN_IF_ERROR(check_tensor(a.beta, "beta", dev, {DType::kFloat32, p->dtype},
                                         tok({p->HV}), hint("HV")));
  }
  ATTNKIT_RETURN_IF_ERROR(
      check_tensor(a.o, "o", dev, {p->dtype}, tok({p->HV, p->V}), hint("HV, V")));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->K, "q/k head size K"));
  ATTNKIT_RETURN_IF_ERROR(check_head_size(p->V, "v head size V"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.state_pool, "state_pool"));
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.state_pool, "state_pool", 4));
  p->P = a.state_pool.shape[0];
  ATTNKIT_RETURN_IF_ERROR(check_tensor(a.state_pool, "state_pool", dev, {DType::kFloat32},
                                       {-1, p->HV, p->K, p->V}, "([P, HV, K, V])", Inner::kLastTwo));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.state_indices, "state_indices"));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.state_indices, "state_indices", {DType::kInt32}));
  ATTNKIT_RETURN_IF_ERROR(require_shape(a.state_indices, "state_indices", {p->N}));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(a.state_indices, "state_indices"));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(a.state_indices, "state_indices", dev));
  ATTNKIT_RETURN_IF_ERROR(require_data(a.state_indices, "state_indices"));
  if (a.step_states.defined())
    ATTNKIT_RETURN_IF_ERROR(check_tensor(a.step_states, "step_states", dev, {DType::kFloat32},
                                         {p->N, p->T, p->HV, p->K, p->V}, "([N, T, HV, K, V])",
                                         Inner::kLastTwo));
  p->update_pool = a.update_pool;
  p->use_qk_l2norm = a.use_qk_l2norm;
  if (!std::isfinite(a.scale)) return Status::Invalid("scale must be finite (0 = K^-1/2)");
  p->scale = a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(p->K));
  // The pool is read and written in place: apart from the other tensors, like an output.
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart(
      {{&a.o, "o"}, {&a.state_pool, "state_pool"}, {&a.step_states, "step_states"}},
      {{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.g, "g"}, {&a.beta, "beta"},
       {&a.A_log, "A_log"}, {&a.a, "a"}, {&a.dt_bias, "dt_bias"}, {&a.b, "b"},
       {&a.state_indices, "state_indices"}}));

  p->indices_on_host = dev.type == DeviceType::kCPU || opts.validate_device_indices;
  if (!p->indices_on_host) return Status::Ok();
  ATTNKIT_RETURN_IF_ERROR(
      read_slots(a.state_indices, "state_indices", p->N, p->P, "state_pool", opts, &p->slots));
  return Status::Ok();
}

Status count_gdn_chunks(const TensorView& q, const TensorView& cu_seqlens, int64_t* num_chunks) {
  if (num_chunks == nullptr) return Status::Invalid("num_chunks must not be null");
  GdnProblem p;
  ATTNKIT_RETURN_IF_ERROR(check_base(q, "q", kTokenTypes, 4, cu_seqlens, &p));
  ExecOptions opts;
  opts.validate_device_indices = true;
  ATTNKIT_RETURN_IF_ERROR(read_layout(cu_seqlens, opts, &p));
  *num_chunks = p.num_chunks;
  return Status::Ok();
}

}  // namespace attnkit::detail
