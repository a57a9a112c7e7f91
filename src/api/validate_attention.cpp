// Argument validation for attention_forward and merge_states. Runs before any data is touched;
// every error names the argument at fault.
#include <cmath>
#include <string>

#include "api/attention_problem.h"
#include "api/check.h"

namespace attnkit::detail {
namespace {

constexpr int64_t kMlaDqk = 576, kMlaDv = 512;  // MLA's latent + rope width, latent width

bool supported_head_dim(int64_t d) {
  return d == 32 || d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
}

Status check_float_tensor(const TensorView& t, const char* name, const Device& dev) {
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_last_dim_contiguous(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(t, name, dev));
  ATTNKIT_RETURN_IF_ERROR(require_data(t, name));
  if (dev.type == DeviceType::kCUDA) ATTNKIT_RETURN_IF_ERROR(require_vector_aligned(t, name));
  return Status::Ok();
}

Status check_index_tensor(const TensorView& t, const char* name, const Device& dev) {
  ATTNKIT_RETURN_IF_ERROR(require_dtype(t, name, {DType::kInt32}));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(t, name, dev));
  return require_data(t, name);
}

Status check_head_vector(const TensorView& t, const char* name, int hq, const Device& dev) {
  ATTNKIT_RETURN_IF_ERROR(require_dtype(t, name, {DType::kFloat32}));
  ATTNKIT_RETURN_IF_ERROR(require_shape(t, name, {hq}));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(t, name));
  ATTNKIT_RETURN_IF_ERROR(require_same_device(t, name, dev));
  return require_data(t, name);
}

}  // namespace

Status validate_attention(const AttentionArgs& a, const ExecOptions& opts, AttnProblem* p) {
  *p = AttnProblem{};
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.q, "q"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.k, "k"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.v, "v"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.o, "o"));
  const Device dev = a.q.device;
  p->device = dev;

  ATTNKIT_RETURN_IF_ERROR(require_dtype(
      a.q, "q", {DType::kBFloat16, DType::kFloat16, DType::kFloat32, DType::kFloat8E4M3}));
  p->q_fp8 = a.q.dtype == DType::kFloat8E4M3;
  p->kv_fp8 = a.k.dtype == DType::kFloat8E4M3;
  if (p->q_fp8) {  // FP8 attention: e4m3 Q, K and V; O's dtype is the compute dtype
    ATTNKIT_RETURN_IF_ERROR(require_dtype(a.o, "o (with fp8e4m3 q)", {DType::kBFloat16, DType::kFloat16}));
    p->dtype = a.o.dtype;
    if (!p->kv_fp8)
      return Status::Invalid("q is fp8e4m3: FP8 attention needs fp8e4m3 k and v too, not " +
                             std::string(to_string(a.k.dtype)));
  } else {
    p->dtype = a.q.dtype;
    if (p->kv_fp8 && a.q.dtype == DType::kFloat32)
      return Status::Invalid("k is fp8e4m3: an FP8 KV cache needs fp16 or bf16 q, not fp32");
    ATTNKIT_RETURN_IF_ERROR(require_dtype(a.o, "o", {a.q.dtype, DType::kFloat32}));
    p->o_fp32 = a.o.dtype != a.q.dtype;
  }
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.k, "k", {p->dtype, DType::kFloat8E4M3}));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.v, "v", {a.k.dtype}));
  if (!p->kv_fp8 && (a.k_scale.defined() || a.v_scale.defined()))
    return Status::Invalid("k_scale / v_scale are for fp8e4m3 K / V; k is " +
                           std::string(to_string(a.k.dtype)));
  if (!p->q_fp8 && a.q_scale.defined())
    return Status::Invalid("q_scale is for fp8e4m3 q; q is " + std::string(to_string(a.q.dtype)));
  for (auto [t, n] : {std::pair{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.o, "o"}})
    ATTNKIT_RETURN_IF_ERROR(check_float_tensor(*t, n, dev));

  // ---- Q
  p->q_ragged = a.cu_seqlens_q.defined();
  if (p->q_ragged) {
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.q, "q (ragged, with cu_seqlens_q)", 3));
    ATTNKIT_RETURN_IF_ERROR(check_index_tensor(a.cu_seqlens_q, "cu_seqlens_q", dev));
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.cu_seqlens_q, "cu_seqlens_q", 1));
    if (a.cu_seqlens_q.shape[0] < 1)
      return Status::Invalid("cu_seqlens_q must have B+1 >= 1 entries");
    p->batch = static_cast<int>(a.cu_seqlens_q.shape[0] - 1);
    p->q_rows = a.q.shape[0];
  } else {
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.q, "q", 4));
    p->batch = static_cast<int>(a.q.shape[0]);
    p->q_rows = a.q.shape[1];
  }
  p->hq = static_cast<int>(a.q.size(-2));
  p->dqk = static_cast<int>(a.q.size(-1));
  if (p->hq < 1) return Status::Invalid("q must have at least one head");

  // ---- K / V layout
  const bool paged = a.page_table.defined();
  const bool ragged_k = a.cu_seqlens_k.defined();
  if (paged && ragged_k)
    return Status::Invalid("give either page_table (paged KV) or cu_seqlens_k (ragged KV), not both");
  if (paged) {
    p->kv = KvLayout::kPaged;
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.k, "k (paged)", 4));
    ATTNKIT_RETURN_IF_ERROR(check_index_tensor(a.page_table, "page_table", dev));
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.page_table, "page_table", 2));
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.page_table, "page_table", {p->batch, -1}));
    if (!a.seqused_k.defined())
      return Status::Invalid("seqused_k is required with page_table (keys used per sequence)");
    p->num_pages = a.k.shape[0];
    p->k_rows = a.k.shape[1];
    p->max_pages = a.page_table.shape[1];
    if (p->k_rows < 1) return Status::Invalid("k (paged) page size must be >= 1");
  } else if (ragged_k) {
    p->kv = KvLayout::kRagged;
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.k, "k (ragged, with cu_seqlens_k)", 3));
    ATTNKIT_RETURN_IF_ERROR(check_index_tensor(a.cu_seqlens_k, "cu_seqlens_k", dev));
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.cu_seqlens_k, "cu_seqlens_k", {p->batch + 1}));
    p->k_rows = a.k.shape[0];
  } else {
    p->kv = KvLayout::kContiguous;
    ATTNKIT_RETURN_IF_ERROR(require_rank(a.k, "k", 4));
    if (a.k.shape[0] != p->batch)
      return Status::Invalid("k has batch " + std::to_string(a.k.shape[0]) + " but q has " +
                             std::to_string(p->batch));
    p->k_rows = a.k.shape[1];
  }
  p->hkv = static_cast<int>(a.k.size(-2));
  p->dv = static_cast<int>(a.v.size(-1));
  if (p->hkv < 1) return Status::Invalid("k must have at least one head");
  if (p->hq % p->hkv != 0)
    return Status::Invalid("q heads (" + std::to_string(p->hq) + ") must be a multiple of k/v heads (" +
                           std::to_string(p->hkv) + ")");
  if (a.k.size(-1) != p->dqk)
    return Status::Invalid("k head dim (" + std::to_string(a.k.size(-1)) +
                           ") must equal q head dim (" + std::to_string(p->dqk) + ")");
  if (a.v.ndim != a.k.ndim)
    return Status::Invalid("v must have the same rank as k");
  for (int d = 0; d + 1 < a.k.ndim; ++d)
    if (a.v.shape[d] != a.k.shape[d])
      return Status::Invalid("v has shape " + shape_str(a.v) + ", which must match k " +
                             shape_str(a.k) + " in all but the last dimension");
  if (p->kv_fp8) {
    ATTNKIT_RETURN_IF_ERROR(
        kv_scale_kind(a.k_scale, "k_scale", a.k, p->hkv, p->batch, p->hkv, dev, &p->k_scale));
    ATTNKIT_RETURN_IF_ERROR(
        kv_scale_kind(a.v_scale, "v_scale", a.v, p->hkv, p->batch, p->hkv, dev, &p->v_scale));
  }
  if (p->q_fp8)
    ATTNKIT_RETURN_IF_ERROR(
        kv_scale_kind(a.q_scale, "q_scale", a.q, p->hq, p->batch, p->hkv, dev, &p->q_scale));
  // Multi-head latent attention (DeepSeek-V3 / Kimi-K2): K the latent cache with its rope part,
  // V its first 512 values, usually a view of the same cache.
  const bool mla = p->dqk == kMlaDqk && p->dv == kMlaDv;
  if (!mla && !supported_head_dim(p->dqk))
    return Status::Unsupported("head dim " + std::to_string(p->dqk) +
                               " of q/k is not supported (32, 64, 96, 128, 192, 256; 576 with "
                               "v 512 for MLA)");
  if (!mla && !supported_head_dim(p->dv))
    return Status::Unsupported("head dim " + std::to_string(p->dv) +
                               " of v is not supported (32, 64, 96, 128, 192, 256; 512 with "
                               "q/k 576 for MLA)");

  // ---- outputs
  if (p->q_ragged)
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.o, "o", {p->q_rows, p->hq, p->dv}));
  else
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.o, "o", {p->batch, p->q_rows, p->hq, p->dv}));
  p->has_lse = a.lse.defined();
  if (p->has_lse) {
    ATTNKIT_RETURN_IF_ERROR(require_dtype(a.lse, "lse", {DType::kFloat32}));
    ATTNKIT_RETURN_IF_ERROR(require_valid_layout(a.lse, "lse"));
    ATTNKIT_RETURN_IF_ERROR(require_same_device(a.lse, "lse", dev));
    ATTNKIT_RETURN_IF_ERROR(require_data(a.lse, "lse"));
    if (p->q_ragged)
      ATTNKIT_RETURN_IF_ERROR(require_shape(a.lse, "lse", {p->q_rows, p->hq}));
    else
      ATTNKIT_RETURN_IF_ERROR(require_shape(a.lse, "lse", {p->batch, p->q_rows, p->hq}));
  }

  // ---- seqused_k
  p->has_seqused_k = a.seqused_k.defined();
  if (p->has_seqused_k) {
    if (p->kv == KvLayout::kRagged)
      return Status::Invalid("seqused_k goes with contiguous or paged KV, not with cu_seqlens_k");
    ATTNKIT_RETURN_IF_ERROR(check_index_tensor(a.seqused_k, "seqused_k", dev));
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.seqused_k, "seqused_k", {p->batch}));
  }

  // ---- scalars
  if (!std::isfinite(a.scale)) return Status::Invalid("scale must be finite");
  p->scale = a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(p->dqk));
  if (!(a.softcap >= 0.f) || !std::isfinite(a.softcap))
    return Status::Invalid("softcap must be finite and >= 0 (0 disables it)");
  p->softcap = a.softcap;
  if (a.mask.window_left < -1)
    return Status::Invalid("mask.window_left must be >= -1 (-1 = unbounded), got " +
                           std::to_string(a.mask.window_left));
  if (a.mask.window_right < -1)
    return Status::Invalid("mask.window_right must be >= -1 (-1 = unbounded), got " +
                           std::to_string(a.mask.window_right));
  if (a.mask.chunk_size < 0)
    return Status::Invalid("mask.chunk_size must be >= 0 (0 = no chunking)");
  p->mask = a.mask;
  if (a.num_splits < 0) return Status::Invalid("num_splits must be >= 0 (0 = automatic)");
  p->has_alibi = a.alibi_slopes.defined();
  if (p->has_alibi) ATTNKIT_RETURN_IF_ERROR(check_head_vector(a.alibi_slopes, "alibi_slopes", p->hq, dev));
  p->has_sinks = a.sinks.defined();
  if (p->has_sinks) ATTNKIT_RETURN_IF_ERROR(check_head_vector(a.sinks, "sinks", p->hq, dev));

  // ---- aliasing: the outputs apart from every input and from each other (check.h)
  ATTNKIT_RETURN_IF_ERROR(require_outputs_apart(
      {{&a.o, "o"}, {&a.lse, "lse"}},
      {{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.q_scale, "q_scale"}, {&a.k_scale, "k_scale"},
       {&a.v_scale, "v_scale"},
       {&a.cu_seqlens_q, "cu_seqlens_q"}, {&a.cu_seqlens_k, "cu_seqlens_k"},
       {&a.page_table, "page_table"}, {&a.seqused_k, "seqused_k"},
       {&a.alibi_slopes, "alibi_slopes"}, {&a.sinks, "sinks"}}));

  // ---- index contents: read them when the host can see them (or validation was asked for)
  const bool need_indices = p->q_ragged || p->kv != KvLayout::kContiguous || p->has_seqused_k;
  p->indices_on_host = dev.type == DeviceType::kCPU || opts.validate_device_indices || !need_indices;
  const int64_t k_total = p->kv == KvLayout::kPaged ? p->max_pages * p->k_rows : p->k_rows;
  if (p->indices_on_host) {
    if (p->q_ragged) {
      ATTNKIT_RETURN_IF_ERROR(read_int32(a.cu_seqlens_q, "cu_seqlens_q", opts.stream, &p->cu_q));
      ATTNKIT_RETURN_IF_ERROR(check_cu_seqlens(p->cu_q, "cu_seqlens_q", p->q_rows));
    }
    if (p->kv == KvLayout::kRagged) {
      ATTNKIT_RETURN_IF_ERROR(read_int32(a.cu_seqlens_k, "cu_seqlens_k", opts.stream, &p->cu_k));
      ATTNKIT_RETURN_IF_ERROR(check_cu_seqlens(p->cu_k, "cu_seqlens_k", p->k_rows));
    }
    if (p->has_seqused_k) {
      ATTNKIT_RETURN_IF_ERROR(read_int32(a.seqused_k, "seqused_k", opts.stream, &p->seqused_k));
      for (int b = 0; b < p->batch; ++b)
        if (p->seqused_k[b] < 0 || p->seqused_k[b] > k_total)
          return Status::Invalid("seqused_k[" + std::to_string(b) + "] = " +
                                 std::to_string(p->seqused_k[b]) + " is outside [0, " +
                                 std::to_string(k_total) + "]");
    }
    if (p->kv == KvLayout::kPaged) {
      ATTNKIT_RETURN_IF_ERROR(read_int32(a.page_table, "page_table", opts.stream, &p->page_table));
      for (int b = 0; b < p->batch; ++b) {
        const int64_t used_pages = (p->seqused_k[b] + p->k_rows - 1) / p->k_rows;
        for (int64_t i = 0; i < used_pages; ++i) {
          const int32_t pg = p->page_table[b * p->max_pages + i];
          if (pg < 0 || pg >= p->num_pages)
            return Status::Invalid("page_table[" + std::to_string(b) + ", " + std::to_string(i) +
                                   "] = " + std::to_string(pg) + " is outside [0, " +
                                   std::to_string(p->num_pages) + ")");
        }
      }
    }
    int64_t mq = 0, mk = 0;
    for (int b = 0; b < p->batch; ++b) {
      mq = std::max(mq, p->seqlen_q(b));
      mk = std::max(mk, p->seqlen_k(b));
    }
    p->max_seqlen_q = static_cast<int>(mq);
    p->max_seqlen_k = static_cast<int>(mk);
  } else {
    // Unread device indices: use the caller's bounds, else the tensor sizes (upper bounds).
    p->max_seqlen_q = a.max_seqlen_q > 0 ? a.max_seqlen_q : static_cast<int>(p->q_rows);
    p->max_seqlen_k = a.max_seqlen_k > 0 ? a.max_seqlen_k : static_cast<int>(k_total);
    if (!p->q_ragged) p->max_seqlen_q = static_cast<int>(p->q_rows);
  }
  if (a.max_seqlen_q < 0 || a.max_seqlen_k < 0)
    return Status::Invalid("max_seqlen_q / max_seqlen_k must be >= 0 (0 = derive)");
  return Status::Ok();
}

Status validate_merge_states(const MergeStatesArgs& a, MergeProblem* p) {
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.o_parts, "o_parts"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.lse_parts, "lse_parts"));
  ATTNKIT_RETURN_IF_ERROR(require_defined(a.o, "o"));
  const Device dev = a.o_parts.device;
  p->device = dev;
  ATTNKIT_RETURN_IF_ERROR(require_rank(a.o_parts, "o_parts", 4));
  ATTNKIT_RETURN_IF_ERROR(
      require_dtype(a.o_parts, "o_parts", {DType::kFloat32, DType::kFloat16, DType::kBFloat16}));
  ATTNKIT_RETURN_IF_ERROR(
      require_dtype(a.o, "o", {DType::kFloat32, DType::kFloat16, DType::kBFloat16}));
  ATTNKIT_RETURN_IF_ERROR(require_dtype(a.lse_parts, "lse_parts", {DType::kFloat32}));
  p->n = a.o_parts.shape[0];
  p->t = a.o_parts.shape[1];
  p->h = a.o_parts.shape[2];
  p->d = a.o_parts.shape[3];
  if (p->n < 1) return Status::Invalid("o_parts must hold at least one state");
  ATTNKIT_RETURN_IF_ERROR(require_shape(a.lse_parts, "lse_parts", {p->n, p->t, p->h}));
  ATTNKIT_RETURN_IF_ERROR(require_shape(a.o, "o", {p->t, p->h, p->d}));
  for (auto [t, n] : {std::pair{&a.o_parts, "o_parts"}, {&a.lse_parts, "lse_parts"}, {&a.o, "o"}}) {
    ATTNKIT_RETURN_IF_ERROR(require_valid_layout(*t, n));
    ATTNKIT_RETURN_IF_ERROR(require_same_device(*t, n, dev));
    ATTNKIT_RETURN_IF_ERROR(require_data(*t, n));
  }
  ATTNKIT_RETURN_IF_ERROR(require_last_dim_contiguous(a.o_parts, "o_parts"));
  ATTNKIT_RETURN_IF_ERROR(require_last_dim_contiguous(a.o, "o"));
  if (a.lse.defined()) {
    ATTNKIT_RETURN_IF_ERROR(require_dtype(a.lse, "lse", {DType::kFloat32}));
    ATTNKIT_RETURN_IF_ERROR(require_shape(a.lse, "lse", {p->t, p->h}));
    ATTNKIT_RETURN_IF_ERROR(require_valid_layout(a.lse, "lse"));
    ATTNKIT_RETURN_IF_ERROR(require_same_device(a.lse, "lse", dev));
    ATTNKIT_RETURN_IF_ERROR(require_data(a.lse, "lse"));
  }
  return require_outputs_apart({{&a.o, "o"}, {&a.lse, "lse"}},
                               {{&a.o_parts, "o_parts"}, {&a.lse_parts, "lse_parts"}});
}

}  // namespace attnkit::detail
