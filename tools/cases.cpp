#include "cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "gpu.h"

namespace attnkit::cli {

using testkit::Buffer;

namespace {

// Large tensors under Fill::kFast repeat a block of this many elements; its odd size keeps the
// repeats from lining up with rows or heads.
constexpr int64_t kFastBlock = (int64_t{1} << 20) + 7;

Status fill_random(Buffer& b, std::mt19937_64& rng, Fill fill, float stddev) {
  if (fill == Fill::kExact || b.numel() <= kFastBlock) {
    testkit::fill_normal(b, rng, 0.f, stddev);
    return Status::Ok();
  }
  Buffer block(b.dtype(), {kFastBlock}, cpu());
  testkit::fill_normal(block, rng, 0.f, stddev);
  const size_t total = b.bytes(), chunk = block.bytes();
  for (size_t off = 0; off < total; off += chunk) {
    char* dst = static_cast<char*>(b.data()) + off;
    const size_t n = std::min(chunk, total - off);
    if (b.device().type == DeviceType::kCPU) std::memcpy(dst, block.data(), n);
    else ATTNKIT_RETURN_IF_ERROR(gpu::copy_from_host(dst, block.data(), n));
  }
  return Status::Ok();
}

// Unit-norm rows of the last dimension: what the delta rule expects of q and k.
void fill_unit_rows(Buffer& b, std::mt19937_64& rng, int64_t row) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(b.numel()));
  for (auto& x : v) x = d(rng);
  for (size_t r = 0; r + row <= v.size(); r += row) {
    double n = 0;
    for (int64_t i = 0; i < row; ++i) n += double(v[r + i]) * v[r + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(std::max(n, 1e-12)));
    for (int64_t i = 0; i < row; ++i) v[r + i] *= inv;
  }
  b.from_float(v);
}

std::vector<int32_t> prefix_sums(const std::vector<int64_t>& lens) {
  std::vector<int32_t> cu(lens.size() + 1, 0);
  for (size_t i = 0; i < lens.size(); ++i) cu[i + 1] = cu[i] + static_cast<int32_t>(lens[i]);
  return cu;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::string list_label(const std::vector<int64_t>& v) {
  if (v.size() > 6) {
    const int64_t total = std::accumulate(v.begin(), v.end(), int64_t{0});
    return std::to_string(v.size()) + "seqs/" + std::to_string(total);
  }
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + ")";
}

Buffer clone(const Buffer& b, Device dev) { return b.shape().empty() ? Buffer() : b.to(dev); }

// FP8 scales: uniform in [1/128, 1/32], a block tiled like fill_random's.
Status fill_uniform_scales(Buffer& b, std::mt19937_64& rng, Fill fill) {
  Buffer host(DType::kFloat32, b.shape(), cpu());
  if (fill == Fill::kExact || b.numel() <= kFastBlock) {
    testkit::fill_uniform(host, rng, 1.f / 128, 1.f / 32);
  } else {
    Buffer block(DType::kFloat32, {kFastBlock}, cpu());
    testkit::fill_uniform(block, rng, 1.f / 128, 1.f / 32);
    for (size_t off = 0; off < host.bytes(); off += block.bytes())
      std::memcpy(static_cast<char*>(host.data()) + off, block.data(),
                  std::min(block.bytes(), host.bytes() - off));
  }
  b = clone(host, b.device());
  return Status::Ok();
}
Buffer alloc_like(const Buffer& b, Device dev) {
  return b.shape().empty() ? Buffer() : Buffer(b.dtype(), b.shape(), dev);
}
TensorView view_or_none(const Buffer& b) { return b.shape().empty() ? TensorView{} : b.view(); }
void poison_if(Buffer& b) {
  if (!b.shape().empty()) b.poison();
}

std::string fmt_float(float f) {
  std::ostringstream os;
  os << f;
  return os.str();
}

}  // namespace

// ---------------------------------------------------------------- attention

int AttnCase::num_seqs() const {
  return varlen_q.empty() ? batch : static_cast<int>(varlen_q.size());
}

int64_t AttnCase::len_q(int b) const { return varlen_q.empty() ? seqlen_q : varlen_q[b]; }

int64_t AttnCase::len_k(int b) const {
  if (!varlen_k.empty()) return varlen_k[b];
  if (!seqused_k.empty()) return seqused_k[b];
  return seqlen_k;
}

int64_t AttnCase::total_q() const {
  int64_t t = 0;
  for (int b = 0; b < num_seqs(); ++b) t += len_q(b);
  return t;
}

std::string AttnCase::describe() const {
  std::ostringstream os;
  if (varlen_q.empty()) os << "b" << batch << " ";
  else os << "q" << list_label(varlen_q) << " ";
  if (!varlen_k.empty()) {
    if (varlen_q.empty()) os << "sq" << seqlen_q << " ";
    os << "k" << list_label(varlen_k);
  } else if (varlen_q.empty() && seqlen_q == seqlen_k && seqused_k.empty()) {
    os << "s" << seqlen_q;
  } else {
    if (varlen_q.empty()) os << "sq" << seqlen_q << " ";
    os << "sk" << seqlen_k;
    if (!seqused_k.empty()) os << " used" << list_label(seqused_k);
  }
  os << " h" << heads_q;
  if (heads_kv != heads_q) os << "/" << heads_kv;
  os << " d" << dim_qk;
  if (dim_v != dim_qk) os << "/" << dim_v;
  if (paged) os << " paged" << page_size;
  else if (!varlen_k.empty()) os << " ragged-kv";
  if (mask.is_none()) {
    os << " full";
  } else if (mask.window_left < 0 && mask.window_right == 0 && mask.chunk_size == 0) {
    os << " causal";
  } else {
    if (mask.window_left >= 0 || mask.window_right >= 0)
      os << " window(" << mask.window_left << "," << mask.window_right << ")";
    if (mask.chunk_size > 0) os << " chunk" << mask.chunk_size;
  }
  if (softcap > 0) os << " softcap" << fmt_float(softcap);
  if (alibi) os << " alibi";
  if (sinks) os << " sinks";
  if (scale != 0) os << " scale" << fmt_float(scale);
  if (q_std != 1.f) os << " qstd" << fmt_float(q_std);
  if (num_splits != 0) os << " splits" << num_splits;
  if (!kv_fp8.empty()) os << " kv-e4m3/" << kv_fp8;
  if (!q_fp8.empty()) os << " q-e4m3/" << q_fp8;
  if (lse) os << " lse";
  os << " " << to_string(dtype);
  return os.str();
}

int64_t AttnCase::visible_pairs() const {
  int64_t pairs = 0;
  for (int b = 0; b < num_seqs(); ++b) {
    const int64_t sq = len_q(b), sk = len_k(b);
    for (int64_t i = 0; i < sq; ++i) {
      const int64_t p = i + sk - sq;  // bottom-right aligned diagonal
      int64_t lo = 0, hi = sk;        // [lo, hi)
      if (mask.window_left >= 0) lo = std::max(lo, p - mask.window_left);
      if (mask.window_right >= 0) hi = std::min(hi, p + mask.window_right + 1);
      if (mask.chunk_size > 0) {
        const int64_t c0 = floor_div(p, mask.chunk_size) * mask.chunk_size;
        lo = std::max(lo, c0);
        hi = std::min(hi, c0 + mask.chunk_size);
      }
      pairs += std::max<int64_t>(0, hi - lo);
    }
  }
  return pairs;
}

double AttnCase::flops() const {
  return 2.0 * static_cast<double>(visible_pairs()) * (dim_qk + dim_v) * heads_q;
}

double AttnCase::kv_bytes() const {
  double keys = 0;
  for (int b = 0; b < num_seqs(); ++b) keys += static_cast<double>(len_k(b));
  const double scales = kv_fp8 == "token" ? 2.0 * sizeof(float) : 0.0;
  return keys * heads_kv * ((dim_qk + dim_v) * static_cast<double>(dtype_size(kv_dtype())) + scales);
}

Status AttnCase::check() const {
  if (varlen_q.empty() && batch < 1) return Status::Invalid("--batch must be >= 1");
  if (seqlen_q < 0 || seqlen_k < 0) return Status::Invalid("sequence lengths must be >= 0");
  for (auto* l : {&varlen_q, &varlen_k, &seqused_k})
    for (int64_t x : *l)
      if (x < 0) return Status::Invalid("varlen / seqused lengths must be >= 0");
  if (!varlen_k.empty() && static_cast<int>(varlen_k.size()) != num_seqs())
    return Status::Invalid("--varlen-k has " + std::to_string(varlen_k.size()) +
                           " lengths but there are " + std::to_string(num_seqs()) + " sequences");
  if (!seqused_k.empty()) {
    if (static_cast<int>(seqused_k.size()) != num_seqs())
      return Status::Invalid("--seqused-k needs one length per sequence");
    if (!varlen_k.empty() || paged)
      return Status::Invalid("--seqused-k goes with contiguous KV (for paged KV use --varlen-k)");
    for (int64_t x : seqused_k)
      if (x > seqlen_k) return Status::Invalid("--seqused-k entries must be <= --seqlen-k");
  }
  if (paged && page_size < 1) return Status::Invalid("--page-size must be >= 1");
  if (heads_q < 1 || heads_kv < 1 || dim_qk < 1 || dim_v < 1)
    return Status::Invalid("head counts and head dims must be >= 1");
  for (auto [kind, flag] : {std::pair{&kv_fp8, "--kv-fp8"}, {&q_fp8, "--q-fp8"}})
    if (!kind->empty() && *kind != "tensor" && *kind != "head" && *kind != "token" &&
        *kind != "batch-head")
      return Status::Invalid(std::string(flag) + " must be tensor, head, token or batch-head, not '" +
                             *kind + "'");
  if (!q_fp8.empty() && kv_fp8.empty())
    return Status::Invalid("--q-fp8 (FP8 attention) needs --kv-fp8 too");
  return Status::Ok();
}

AttentionArgs AttnTensors::args(const AttnCase& c) const {
  AttentionArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.cu_seqlens_q = view_or_none(cu_q);
  a.cu_seqlens_k = view_or_none(cu_k);
  a.page_table = view_or_none(page_table);
  a.seqused_k = view_or_none(seqused_k);
  a.alibi_slopes = view_or_none(alibi);
  a.sinks = view_or_none(sinks);
  a.q_scale = view_or_none(q_scale);
  a.k_scale = view_or_none(k_scale);
  a.v_scale = view_or_none(v_scale);
  a.o = o.view();
  a.lse = view_or_none(lse);
  a.scale = c.scale;
  a.mask = c.mask;
  a.softcap = c.softcap;
  a.num_splits = c.num_splits;
  // Exact bounds, so that device-side index tensors need no host read-back when planning.
  int64_t mq = 0, mk = 0;
  for (int b = 0; b < c.num_seqs(); ++b) {
    mq = std::max(mq, c.len_q(b));
    mk = std::max(mk, c.len_k(b));
  }
  a.max_seqlen_q = static_cast<int>(mq);
  a.max_seqlen_k = static_cast<int>(mk);
  return a;
}

void AttnTensors::poison_outputs() {
  poison_if(o);
  poison_if(lse);
}

size_t AttnTensors::input_bytes() const {
  return q.bytes() + k.bytes() + v.bytes() + q_scale.bytes() + k_scale.bytes() + v_scale.bytes();
}

Status make_attention(const AttnCase& c, Device dev, Fill fill, std::mt19937_64& rng,
                      AttnTensors* t) {
  ATTNKIT_RETURN_IF_ERROR(c.check());
  *t = AttnTensors{};
  const int B = c.num_seqs();
  const int64_t hq = c.heads_q, hkv = c.heads_kv;
  const DType dt = c.dtype, kvt = c.kv_dtype();
  const DType qt = c.q_fp8.empty() ? dt : DType::kFloat8E4M3;

  if (c.varlen_q.empty()) {
    t->q = Buffer(qt, {B, c.seqlen_q, hq, c.dim_qk}, dev);
    t->o = Buffer(dt, {B, c.seqlen_q, hq, c.dim_v}, dev);
    if (c.lse) t->lse = Buffer(DType::kFloat32, {B, c.seqlen_q, hq}, dev);
  } else {
    const int64_t tq = c.total_q();
    t->q = Buffer(qt, {tq, hq, c.dim_qk}, dev);
    t->o = Buffer(dt, {tq, hq, c.dim_v}, dev);
    if (c.lse) t->lse = Buffer(DType::kFloat32, {tq, hq}, dev);
    t->cu_q = Buffer(DType::kInt32, {B + 1}, dev);
    t->cu_q.from_int(prefix_sums(c.varlen_q));
  }

  if (c.paged) {
    // Pages handed out in a shuffled order, so that page-table indirection is really exercised;
    // one spare page that no sequence uses.
    const int64_t ps = c.page_size;
    std::vector<int64_t> pages(B);
    int64_t max_pages = 1, num_pages = 1;
    for (int b = 0; b < B; ++b) {
      pages[b] = (c.len_k(b) + ps - 1) / ps;
      max_pages = std::max(max_pages, pages[b]);
      num_pages += pages[b];
    }
    std::vector<int32_t> ids(num_pages);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> table(static_cast<size_t>(B * max_pages));
    size_t next = 0;
    for (int b = 0; b < B; ++b)
      for (int64_t i = 0; i < max_pages; ++i)
        // Unused entries still name a real page: a kernel that reads one by mistake stays in bounds.
        table[b * max_pages + i] = i < pages[b] ? ids[next++] : ids[num_pages - 1];
    t->k = Buffer(kvt, {num_pages, ps, hkv, c.dim_qk}, dev);
    t->v = Buffer(kvt, {num_pages, ps, hkv, c.dim_v}, dev);
    t->page_table = Buffer(DType::kInt32, {B, max_pages}, dev);
    t->page_table.from_int(table);
    std::vector<int32_t> used(B);
    for (int b = 0; b < B; ++b) used[b] = static_cast<int32_t>(c.len_k(b));
    t->seqused_k = Buffer(DType::kInt32, {B}, dev);
    t->seqused_k.from_int(used);
  } else if (!c.varlen_k.empty()) {
    const std::vector<int32_t> cu = prefix_sums(c.varlen_k);
    t->k = Buffer(kvt, {cu.back(), hkv, c.dim_qk}, dev);
    t->v = Buffer(kvt, {cu.back(), hkv, c.dim_v}, dev);
    t->cu_k = Buffer(DType::kInt32, {B + 1}, dev);
    t->cu_k.from_int(cu);
  } else {
    t->k = Buffer(kvt, {B, c.seqlen_k, hkv, c.dim_qk}, dev);
    t->v = Buffer(kvt, {B, c.seqlen_k, hkv, c.dim_v}, dev);
    if (!c.seqused_k.empty()) {
      t->seqused_k = Buffer(DType::kInt32, {B}, dev);
      t->seqused_k.from_int(std::vector<int32_t>(c.seqused_k.begin(), c.seqused_k.end()));
    }
  }

  ATTNKIT_RETURN_IF_ERROR(fill_random(t->q, rng, fill, c.q_std));
  ATTNKIT_RETURN_IF_ERROR(fill_random(t->k, rng, fill, 1.f));
  ATTNKIT_RETURN_IF_ERROR(fill_random(t->v, rng, fill, 1.f));
  // FP8: e4m3 codes of N(0, 1) values, and scales around 1 / 64, shaped by their kind.
  auto scale_shape = [&](const std::string& kind, const Buffer& x, int64_t heads) {
    std::vector<int64_t> shape = x.shape();
    shape.pop_back();
    if (kind == "tensor") shape = {1};
    if (kind == "head") shape = {heads};
    if (kind == "batch-head") shape = {B, hkv};
    return shape;
  };
  if (!c.kv_fp8.empty()) {
    const std::vector<int64_t> shape = scale_shape(c.kv_fp8, t->k, hkv);
    t->k_scale = Buffer(DType::kFloat32, shape, dev);
    t->v_scale = Buffer(DType::kFloat32, shape, dev);
    ATTNKIT_RETURN_IF_ERROR(fill_uniform_scales(t->k_scale, rng, fill));
    ATTNKIT_RETURN_IF_ERROR(fill_uniform_scales(t->v_scale, rng, fill));
  }
  if (!c.q_fp8.empty()) {
    t->q_scale = Buffer(DType::kFloat32, scale_shape(c.q_fp8, t->q, hq), dev);
    ATTNKIT_RETURN_IF_ERROR(fill_uniform_scales(t->q_scale, rng, fill));
  }
  if (c.alibi) {
    // The usual geometric slopes 2^(-8(h+1)/H).
    std::vector<float> s(hq);
    for (int64_t h = 0; h < hq; ++h) s[h] = std::exp2(-8.f * static_cast<float>(h + 1) / hq);
    t->alibi = Buffer(DType::kFloat32, {hq}, dev);
    t->alibi.from_float(s);
  }
  if (c.sinks) {
    t->sinks = Buffer(DType::kFloat32, {hq}, dev);
    testkit::fill_normal(t->sinks, rng, 1.f, 1.f);
  }
  return Status::Ok();
}

AttnTensors copy_attention(const AttnTensors& s, Device dev) {
  AttnTensors t;
  t.q = clone(s.q, dev);
  t.k = clone(s.k, dev);
  t.v = clone(s.v, dev);
  t.cu_q = clone(s.cu_q, dev);
  t.cu_k = clone(s.cu_k, dev);
  t.page_table = clone(s.page_table, dev);
  t.seqused_k = clone(s.seqused_k, dev);
  t.alibi = clone(s.alibi, dev);
  t.sinks = clone(s.sinks, dev);
  t.q_scale = clone(s.q_scale, dev);
  t.k_scale = clone(s.k_scale, dev);
  t.v_scale = clone(s.v_scale, dev);
  t.o = alloc_like(s.o, dev);
  t.lse = alloc_like(s.lse, dev);
  return t;
}

// ---------------------------------------------------------------- append_kv_cache

std::string AppendCase::describe() const {
  std::ostringstream os;
  os << "t" << tokens << " pages" << pages << "x" << page_size << " hkv" << heads_kv << " d" << dim_k;
  if (dim_v != dim_k) os << "/" << dim_v;
  os << " " << to_string(dtype);
  if (!cache_fp8.empty()) os << " cache-e4m3/" << cache_fp8;
  if (hnd) os << " HND";
  return os.str();
}

Status AppendCase::check() const {
  if (tokens < 0 || pages < 1 || page_size < 1 || heads_kv < 1 || dim_k < 1 || dim_v < 1)
    return Status::Invalid("append-kv: sizes must be >= 1 (tokens >= 0)");
  if (tokens > pages * page_size)
    return Status::Invalid("append-kv: --tokens must not exceed --pages x --page-size (each slot "
                           "is written once)");
  if (!cache_fp8.empty() && cache_fp8 != "tensor" && cache_fp8 != "head" && cache_fp8 != "token")
    return Status::Invalid("--kv-fp8 must be tensor, head or token, not '" + cache_fp8 + "'");
  return Status::Ok();
}

namespace {
TensorView cache_view(const Buffer& b, const AppendCase& c, int64_t d) {
  if (!c.hnd) return b.view();
  const int64_t p = c.page_size, h = c.heads_kv;
  return make_view(b.data(), b.dtype(), {c.pages, p, h, d}, {h * p * d, d, p * d, 1}, b.device());
}
}  // namespace

AppendKvArgs AppendTensors::args(const AppendCase& c) const {
  AppendKvArgs a;
  a.k = k.view();
  a.v = v.view();
  a.slot_mapping = slots.view();
  a.k_cache = cache_view(k_cache, c, c.dim_k);
  a.v_cache = cache_view(v_cache, c, c.dim_v);
  a.k_scale = view_or_none(k_scale);
  a.v_scale = view_or_none(v_scale);
  return a;
}

AppendTensors copy_append(const AppendTensors& s, Device dev) {
  AppendTensors t;
  t.k = clone(s.k, dev);
  t.v = clone(s.v, dev);
  t.slots = clone(s.slots, dev);
  t.k_cache = clone(s.k_cache, dev);
  t.v_cache = clone(s.v_cache, dev);
  t.k_scale = clone(s.k_scale, dev);
  t.v_scale = clone(s.v_scale, dev);
  return t;
}

Status make_append(const AppendCase& c, Device dev, std::mt19937_64& rng, AppendTensors* t) {
  ATTNKIT_RETURN_IF_ERROR(c.check());
  AppendTensors h;  // made on the host, then copied to dev
  const int64_t p = c.page_size, hkv = c.heads_kv;
  const DType cache_dt = c.cache_fp8.empty() ? c.dtype : DType::kFloat8E4M3;
  auto shape = [&](int64_t d) {
    return c.hnd ? std::vector<int64_t>{c.pages, hkv, p, d} : std::vector<int64_t>{c.pages, p, hkv, d};
  };
  h.k = Buffer(c.dtype, {c.tokens, hkv, c.dim_k});
  h.v = Buffer(c.dtype, {c.tokens, hkv, c.dim_v});
  testkit::fill_normal(h.k, rng, 0.f, 3.f);
  testkit::fill_normal(h.v, rng, 0.f, 0.5f);
  h.k_cache = Buffer(cache_dt, shape(c.dim_k));
  h.v_cache = Buffer(cache_dt, shape(c.dim_v));
  testkit::fill_uniform(h.k_cache, rng, -2.f, 2.f);
  testkit::fill_uniform(h.v_cache, rng, -2.f, 2.f);
  std::vector<int32_t> slots(static_cast<size_t>(c.pages * p));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(c.tokens));
  for (size_t i = 0; i < slots.size(); i += 5) slots[i] = -1;
  h.slots = Buffer(DType::kInt32, {c.tokens});
  h.slots.from_int(slots);
  if (!c.cache_fp8.empty()) {
    const std::vector<int64_t> sshape = c.cache_fp8 == "tensor" ? std::vector<int64_t>{1}
                                        : c.cache_fp8 == "head" ? std::vector<int64_t>{hkv}
                                                                : std::vector<int64_t>{c.pages, p, hkv};
    h.k_scale = Buffer(DType::kFloat32, sshape);
    h.v_scale = Buffer(DType::kFloat32, sshape);
    testkit::fill_uniform(h.k_scale, rng, 0.004f, 0.02f);
    testkit::fill_uniform(h.v_scale, rng, 0.001f, 0.004f);
  }
  *t = copy_append(h, dev);
  return Status::Ok();
}

// ---------------------------------------------------------------- merge_states

std::string MergeCase::describe() const {
  std::ostringstream os;
  os << "n" << parts << " t" << tokens << " h" << heads << " d" << dim << " " << to_string(dtype);
  if (lse) os << " lse";
  return os.str();
}

MergeStatesArgs MergeTensors::args() const {
  MergeStatesArgs a;
  a.o_parts = o_parts.view();
  a.lse_parts = lse_parts.view();
  a.o = o.view();
  a.lse = view_or_none(lse);
  return a;
}

void MergeTensors::poison_outputs() {
  poison_if(o);
  poison_if(lse);
}

Status make_merge(const MergeCase& c, Device dev, std::mt19937_64& rng, MergeTensors* t) {
  if (c.parts < 1 || c.tokens < 0 || c.heads < 1 || c.dim < 1)
    return Status::Invalid("merge: --splits (parts) and --heads-q / --dim-v must be >= 1");
  *t = MergeTensors{};
  t->o_parts = Buffer(c.dtype, {c.parts, c.tokens, c.heads, c.dim}, dev);
  t->lse_parts = Buffer(DType::kFloat32, {c.parts, c.tokens, c.heads}, dev);
  t->o = Buffer(c.dtype, {c.tokens, c.heads, c.dim}, dev);
  if (c.lse) t->lse = Buffer(DType::kFloat32, {c.tokens, c.heads}, dev);
  testkit::fill_normal(t->o_parts, rng);
  std::normal_distribution<float> d(0.f, 3.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> lse(static_cast<size_t>(c.parts * c.tokens * c.heads));
  for (int64_t n = 0; n < c.parts; ++n)
    for (int64_t i = 0; i < c.tokens * c.heads; ++i) {
      const bool token0 = i < c.heads;  // token 0: every part empty
      lse[n * c.tokens * c.heads + i] =
          (token0 || u(rng) < 0.15f) ? -INFINITY : d(rng);
    }
  t->lse_parts.from_float(lse);
  return Status::Ok();
}

MergeTensors copy_merge(const MergeTensors& s, Device dev) {
  MergeTensors t;
  t.o_parts = clone(s.o_parts, dev);
  t.lse_parts = clone(s.lse_parts, dev);
  t.o = alloc_like(s.o, dev);
  t.lse = alloc_like(s.lse, dev);
  return t;
}

// ---------------------------------------------------------------- Gated DeltaNet

int GdnCase::num_seqs() const { return varlen.empty() ? batch : static_cast<int>(varlen.size()); }

int64_t GdnCase::total_tokens() const {
  return varlen.empty() ? batch * seqlen : std::accumulate(varlen.begin(), varlen.end(), int64_t{0});
}

std::string GdnCase::describe(bool decode) const {
  std::ostringstream os;
  if (decode) os << "n" << batch << " pool" << pool_slots();
  else if (varlen.empty()) os << "b" << batch << " t" << seqlen;
  else os << "varlen" << list_label(varlen);
  os << " h" << heads << "/" << heads_v << " k" << dim_k << " v" << dim_v;
  if (initial_state && !decode) os << " h0";
  if (l2norm) os << " l2norm";
  if (scale != 0) os << " scale" << fmt_float(scale);
  os << " " << to_string(dtype);
  return os.str();
}

double GdnCase::flops() const {
  const double bt = kGdnChunk, k = dim_k, v = dim_v;
  const double per_chunk = 2 * bt * bt * k + bt * bt * bt / 3 + 2 * bt * bt * (k + v) +
                           4 * bt * k * v + 2 * bt * bt * (k + v) + 2 * bt * k * v;
  double chunks = 0;
  for (int n = 0; n < num_seqs(); ++n) {
    const int64_t len = varlen.empty() ? seqlen : varlen[n];
    chunks += static_cast<double>((len + kGdnChunk - 1) / kGdnChunk);
  }
  return per_chunk * chunks * heads_v;
}

double GdnCase::decode_state_bytes() const {
  return 2.0 * batch * heads_v * static_cast<double>(dim_k) * dim_v * 4;
}

Status GdnCase::check(bool decode) const {
  if (batch < 1 && varlen.empty()) return Status::Invalid("--batch must be >= 1");
  if (seqlen < 0) return Status::Invalid("--seqlen must be >= 0");
  for (int64_t x : varlen)
    if (x < 0) return Status::Invalid("--varlen lengths must be >= 0");
  if (heads < 1 || heads_v < 1 || dim_k < 1 || dim_v < 1)
    return Status::Invalid("head counts and head dims must be >= 1");
  if (decode && pool_slots() < batch)
    return Status::Invalid("--pool must be >= --batch (each sequence needs its own slot)");
  return Status::Ok();
}

GdnChunkArgs GdnTensors::args(const GdnCase& c) const {
  GdnChunkArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.g = g.view();
  a.beta = beta.view();
  a.cu_seqlens = view_or_none(cu);
  a.initial_state = view_or_none(h0);
  a.final_state = view_or_none(ht);
  a.o = o.view();
  a.scale = c.scale;
  a.use_qk_l2norm = c.l2norm;
  return a;
}

void GdnTensors::poison_outputs() {
  poison_if(o);
  poison_if(ht);
}

namespace {
// g = log(sigmoid(x)) (<= 0) and beta = sigmoid(x), as models produce them.
void fill_gates(Buffer& g, Buffer& beta, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> gv(static_cast<size_t>(g.numel())), bv(static_cast<size_t>(beta.numel()));
  for (auto& x : gv) x = -std::log1p(std::exp(-d(rng)));
  for (auto& x : bv) x = 1.f / (1.f + std::exp(-d(rng)));
  g.from_float(gv);
  beta.from_float(bv);
}

Status fill_qk(Buffer& b, const GdnCase& c, std::mt19937_64& rng, Fill fill) {
  if (c.l2norm) return fill_random(b, rng, fill, 1.f);
  if (fill == Fill::kFast && b.numel() > kFastBlock)  // rows of norm ~1
    return fill_random(b, rng, fill, 1.f / std::sqrt(static_cast<float>(c.dim_k)));
  fill_unit_rows(b, rng, c.dim_k);
  return Status::Ok();
}
}  // namespace

Status make_gdn(const GdnCase& c, Device dev, Fill fill, std::mt19937_64& rng, GdnTensors* t) {
  ATTNKIT_RETURN_IF_ERROR(c.check(false));
  *t = GdnTensors{};
  const int64_t B = c.varlen.empty() ? c.batch : 1;
  const int64_t T = c.varlen.empty() ? c.seqlen : c.total_tokens();
  const int64_t N = c.num_seqs();
  t->q = Buffer(c.dtype, {B, T, c.heads, c.dim_k}, dev);
  t->k = Buffer(c.dtype, {B, T, c.heads, c.dim_k}, dev);
  t->v = Buffer(c.dtype, {B, T, c.heads_v, c.dim_v}, dev);
  t->g = Buffer(DType::kFloat32, {B, T, c.heads_v}, dev);
  t->beta = Buffer(c.dtype, {B, T, c.heads_v}, dev);
  t->o = Buffer(c.dtype, {B, T, c.heads_v, c.dim_v}, dev);
  if (!c.varlen.empty()) {
    t->cu = Buffer(DType::kInt32, {N + 1}, dev);
    t->cu.from_int(prefix_sums(c.varlen));
  }
  if (c.initial_state) {
    t->h0 = Buffer(DType::kFloat32, {N, c.heads_v, c.dim_k, c.dim_v}, dev);
    ATTNKIT_RETURN_IF_ERROR(fill_random(t->h0, rng, fill, 0.1f));
  }
  if (c.final_state) t->ht = Buffer(DType::kFloat32, {N, c.heads_v, c.dim_k, c.dim_v}, dev);
  ATTNKIT_RETURN_IF_ERROR(fill_qk(t->q, c, rng, fill));
  ATTNKIT_RETURN_IF_ERROR(fill_qk(t->k, c, rng, fill));
  ATTNKIT_RETURN_IF_ERROR(fill_random(t->v, rng, fill, 1.f));
  fill_gates(t->g, t->beta, rng);
  return Status::Ok();
}

GdnTensors copy_gdn(const GdnTensors& s, Device dev) {
  GdnTensors t;
  t.q = clone(s.q, dev);
  t.k = clone(s.k, dev);
  t.v = clone(s.v, dev);
  t.g = clone(s.g, dev);
  t.beta = clone(s.beta, dev);
  t.cu = clone(s.cu, dev);
  t.h0 = clone(s.h0, dev);
  t.ht = alloc_like(s.ht, dev);
  t.o = alloc_like(s.o, dev);
  return t;
}

GdnDecodeArgs GdnDecodeTensors::args(const GdnCase& c) const {
  GdnDecodeArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.g = g.view();
  a.beta = beta.view();
  a.state_pool = pool.view();
  a.state_indices = idx.view();
  a.o = o.view();
  a.scale = c.scale;
  a.use_qk_l2norm = c.l2norm;
  return a;
}

void GdnDecodeTensors::poison_outputs() { poison_if(o); }

Status make_gdn_decode(const GdnCase& c, Device dev, Fill fill, std::mt19937_64& rng,
                       GdnDecodeTensors* t) {
  ATTNKIT_RETURN_IF_ERROR(c.check(true));
  *t = GdnDecodeTensors{};
  const int64_t N = c.batch, P = c.pool_slots();
  t->q = Buffer(c.dtype, {N, c.heads, c.dim_k}, dev);
  t->k = Buffer(c.dtype, {N, c.heads, c.dim_k}, dev);
  t->v = Buffer(c.dtype, {N, c.heads_v, c.dim_v}, dev);
  t->g = Buffer(DType::kFloat32, {N, c.heads_v}, dev);
  t->beta = Buffer(c.dtype, {N, c.heads_v}, dev);
  t->pool = Buffer(DType::kFloat32, {P, c.heads_v, c.dim_k, c.dim_v}, dev);
  t->idx = Buffer(DType::kInt32, {N}, dev);
  t->o = Buffer(c.dtype, {N, c.heads_v, c.dim_v}, dev);
  std::vector<int32_t> slots(P);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(N);
  t->idx.from_int(slots);
  ATTNKIT_RETURN_IF_ERROR(fill_qk(t->q, c, rng, fill));
  ATTNKIT_RETURN_IF_ERROR(fill_qk(t->k, c, rng, fill));
  ATTNKIT_RETURN_IF_ERROR(fill_random(t->v, rng, fill, 1.f));
  ATTNKIT_RETURN_IF_ERROR(fill_random(t->pool, rng, fill, 0.1f));
  fill_gates(t->g, t->beta, rng);
  return Status::Ok();
}

GdnDecodeTensors copy_gdn_decode(const GdnDecodeTensors& s, Device dev) {
  GdnDecodeTensors t;
  t.q = clone(s.q, dev);
  t.k = clone(s.k, dev);
  t.v = clone(s.v, dev);
  t.g = clone(s.g, dev);
  t.beta = clone(s.beta, dev);
  t.pool = clone(s.pool, dev);
  t.idx = clone(s.idx, dev);
  t.o = alloc_like(s.o, dev);
  return t;
}

// ---------------------------------------------------------------- helpers

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "bf16" || s == "bfloat16") return *out = DType::kBFloat16, true;
  if (s == "fp16" || s == "float16" || s == "half") return *out = DType::kFloat16, true;
  if (s == "fp32" || s == "float32" || s == "float") return *out = DType::kFloat32, true;
  return false;
}

bool parse_backend(const std::string& s, Backend* out) {
  if (s == "auto") return *out = Backend::kAuto, true;
  if (s == "cpu") return *out = Backend::kCPU, true;
  if (s == "cuda-portable" || s == "portable") return *out = Backend::kCudaPortable, true;
  if (s == "cuda-sm90" || s == "sm90") return *out = Backend::kCudaSm90, true;
  return false;
}

Status parse_gdn_kernels(const std::string& list, detail::GdnKernels* k) {
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string w = list.substr(at, end - at);
    at = end + 1;
    if (w == "mma-sync") k->mma_sync = true;
    else if (w == "mma-sync-intra") k->mma_sync_intra = true;
    else if (w == "decode-ring") k->decode_ring = true;
    else if (w == "cols32" || w == "cols64") k->state_output_cols = w == "cols32" ? 32 : 64;
    else if (w == "cluster1" || w == "cluster2") k->state_output_cluster = w == "cluster1" ? 1 : 2;
    else if (w.rfind("segments", 0) == 0 && w.size() > 8 &&
             w.find_first_not_of("0123456789", 8) == std::string::npos)
      k->segments = std::stoi(w.substr(8));
    else if (!w.empty())
      return Status::Invalid("--gdn-kernels: '" + w + "' is not one of mma-sync, mma-sync-intra, "
                             "decode-ring, cols32, cols64, cluster1, cluster2, segments<n>");
  }
  return Status::Ok();
}

}  // namespace attnkit::cli
