// Naive fp64 softmax attention and merge_states, written from the definitions in attention.h and
// docs/design.md. Deliberately independent of src/api and src/cpu (except the element loaders): it
// re-derives every length from the index tensors and tests the mask key by key, so that a mistake
// in the CPU backend's shortcuts cannot hide in a shared helper.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "cpu/half.h"
#include "testkit/naive.h"

namespace attnkit::testkit {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool on_host(const TensorView& t) { return !t.defined() || t.device.type == DeviceType::kCPU; }

int64_t off(const TensorView& t, std::initializer_list<int64_t> idx) {
  int64_t o = 0;
  int d = 0;
  for (int64_t i : idx) o += i * t.stride[d++];
  return o;
}

// Row-major copy of an int32 tensor of any rank and strides.
std::vector<int64_t> read_ints(const TensorView& t) {
  std::vector<int64_t> out;
  if (!t.defined()) return out;
  const int64_t n = t.numel();
  std::vector<int64_t> idx(t.ndim, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t o = 0;
    for (int d = 0; d < t.ndim; ++d) o += idx[d] * t.stride[d];
    out.push_back(static_cast<const int32_t*>(t.data)[o]);
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Blocks of chunk_size positions start at multiples of it, so position -1 is in block -1 (floor,
// not C++'s truncation toward zero).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

bool visible(const Mask& m, int64_t p, int64_t j) {
  if (m.window_left >= 0 && j < p - m.window_left) return false;
  if (m.window_right >= 0 && j > p + m.window_right) return false;
  if (m.chunk_size > 0 && floor_div(j, m.chunk_size) != floor_div(p, m.chunk_size)) return false;
  return true;
}

}  // namespace

Status naive_append_kv(const AppendKvArgs& a) {
  for (const TensorView* t : {&a.k, &a.v, &a.k_cache, &a.v_cache, &a.slot_mapping, &a.k_scale,
                              &a.v_scale})
    if (!on_host(*t)) return Status::Invalid("naive_append_kv reads host tensors only");
  const std::vector<int64_t> slots = read_ints(a.slot_mapping);
  const int64_t page = a.k_cache.shape[1], hkv = a.k_cache.shape[2];
  const int64_t capacity = a.k_cache.shape[0] * page;
  auto side = [&](const TensorView& x, const TensorView& cache, const TensorView& sc) {
    const bool fp8 = cache.dtype == DType::kFloat8E4M3;
    const int64_t d = cache.shape[3];
    for (size_t t = 0; t < slots.size(); ++t) {
      const int64_t s = slots[t];
      if (s < 0 || s >= capacity) continue;
      const int64_t pg = s / page, row = s % page;
      for (int64_t h = 0; h < hkv; ++h) {
        std::vector<float> v(static_cast<size_t>(d));
        for (int64_t i = 0; i < d; ++i)
          v[i] = ref::load_float(x, off(x, {static_cast<int64_t>(t), h, i}));
        float scale = 1.f;
        if (fp8) {
          const bool token = sc.ndim == 3, tensor = sc.ndim == 1 && sc.shape[0] == 1;
          const int64_t so = token ? off(sc, {pg, row, h}) : tensor ? 0 : h * sc.stride[0];
          if (token) {
            float amax = 0.f;
            for (float e : v) amax = std::max(amax, std::fabs(e));
            ref::store_float(sc, so, amax > 0.f ? amax / 448.f : 1.f);
          }
          scale = ref::load_float(sc, so);
        }
        for (int64_t i = 0; i < d; ++i)
          ref::store_float(cache, off(cache, {pg, row, h, i}), fp8 ? v[i] / scale : v[i]);
      }
    }
  };
  side(a.k, a.k_cache, a.k_scale);
  side(a.v, a.v_cache, a.v_scale);
  return Status::Ok();
}

Status naive_attention(const AttentionArgs& a, std::vector<double>* o, std::vector<double>* lse) {
  for (const TensorView* t : {&a.q, &a.k, &a.v, &a.cu_seqlens_q, &a.cu_seqlens_k, &a.page_table,
                              &a.seqused_k, &a.alibi_slopes, &a.sinks, &a.q_scale, &a.k_scale,
                              &a.v_scale})
    if (!on_host(*t)) return Status::Invalid("naive_attention reads host tensors only");
  if (!a.q.defined() || !a.k.defined() || !a.v.defined())
    return Status::Invalid("naive_attention needs q, k and v");

  const bool ragged_q = a.cu_seqlens_q.defined();
  const bool paged = a.page_table.defined();
  const bool ragged_k = a.cu_seqlens_k.defined();
  const std::vector<int64_t> cu_q = read_ints(a.cu_seqlens_q);
  const std::vector<int64_t> cu_k = read_ints(a.cu_seqlens_k);
  const std::vector<int64_t> table = read_ints(a.page_table);
  const std::vector<int64_t> used = read_ints(a.seqused_k);

  const int64_t batch = ragged_q ? static_cast<int64_t>(cu_q.size()) - 1 : a.q.shape[0];
  const int64_t q_rows = ragged_q ? a.q.shape[0] : batch * a.q.shape[1];
  const int64_t hq = a.q.size(-2), dqk = a.q.size(-1);
  const int64_t hkv = a.k.size(-2), dv = a.v.size(-1);
  if (hkv < 1 || hq % hkv != 0) return Status::Invalid("naive_attention: hq % hkv != 0");
  const int64_t group = hq / hkv;
  const double scale = a.scale != 0.f ? a.scale : 1.0 / std::sqrt(static_cast<double>(dqk));
  const int64_t page_size = paged ? a.k.shape[1] : 1;
  const int64_t max_pages = paged ? a.page_table.shape[1] : 0;

  o->assign(static_cast<size_t>(q_rows * hq * dv), 0.0);
  if (lse) lse->assign(static_cast<size_t>(q_rows * hq), kNegInf);

  // Element offset of key j of sequence b, head hk, in k (or v, which has k's leading strides).
  auto key_off = [&](const TensorView& t, int64_t b, int64_t j, int64_t hk) {
    if (paged) return off(t, {table[b * max_pages + j / page_size], j % page_size, hk});
    if (ragged_k) return off(t, {cu_k[b] + j, hk});
    return off(t, {b, j, hk});
  };
  // FP8 scales (attention.h): per tensor [1], per head [H] of their tensor, per token (the
  // tensor's leading dims), or per (sequence, KV head) [B, Hkv]; 1 without a scale.
  auto per_token = [](const TensorView& sc, const TensorView& t) {
    if (sc.ndim != t.ndim - 1) return false;
    for (int d = 0; d < sc.ndim; ++d)
      if (sc.shape[d] != t.shape[d]) return false;
    return true;
  };
  auto kv_scale = [&](const TensorView& sc, int64_t b, int64_t j, int64_t hk) -> double {
    if (!sc.defined()) return 1.0;
    if (sc.ndim == 1) return ref::load_float(sc, sc.shape[0] == 1 ? 0 : hk * sc.stride[0]);
    if (!per_token(sc, a.k)) return ref::load_float(sc, off(sc, {b, hk}));
    return ref::load_float(sc, key_off(sc, b, j, hk));
  };
  auto q_scale = [&](int64_t b, int64_t row, int64_t i, int64_t h) -> double {
    const TensorView& sc = a.q_scale;
    if (!sc.defined()) return 1.0;
    if (sc.ndim == 1) return ref::load_float(sc, sc.shape[0] == 1 ? 0 : h * sc.stride[0]);
    if (!per_token(sc, a.q)) return ref::load_float(sc, off(sc, {b, h / group}));
    return ref::load_float(sc, ragged_q ? off(sc, {row, h}) : off(sc, {b, i, h}));
  };

  std::vector<double> qv(dqk), s, acc(dv);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t sq = ragged_q ? cu_q[b + 1] - cu_q[b] : a.q.shape[1];
    const int64_t sk = paged || a.seqused_k.defined() ? used[b]
                       : ragged_k                     ? cu_k[b + 1] - cu_k[b]
                                                      : a.k.shape[1];
    if (paged && (sk + page_size - 1) / page_size > max_pages)
      return Status::Invalid("naive_attention: seqused_k past the page table");
    for (int64_t pg = 0; paged && pg < (sk + page_size - 1) / page_size; ++pg)
      if (table[b * max_pages + pg] < 0 || table[b * max_pages + pg] >= a.k.shape[0])
        return Status::Invalid("naive_attention: page_table entry out of range");
    for (int64_t i = 0; i < sq; ++i) {
      const int64_t row = ragged_q ? cu_q[b] + i : b * a.q.shape[1] + i;  // row of the output
      const int64_t p = i + sk - sq;
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t hk = h / group;
        const int64_t q_off = ragged_q ? off(a.q, {row, h}) : off(a.q, {b, i, h});
        const double qs = q_scale(b, row, i, h);
        for (int64_t d = 0; d < dqk; ++d)
          qv[d] = qs * ref::load_float(a.q, q_off + d * a.q.stride_of(-1));

        s.assign(static_cast<size_t>(sk), kNegInf);
        double m = kNegInf;
        bool any = false;
        for (int64_t j = 0; j < sk; ++j) {
          if (!visible(a.mask, p, j)) continue;
          const int64_t k_off = key_off(a.k, b, j, hk);
          double dot = 0;
          for (int64_t d = 0; d < dqk; ++d)
            dot += qv[d] * ref::load_float(a.k, k_off + d * a.k.stride_of(-1));
          double x = dot * kv_scale(a.k_scale, b, j, hk) * scale;
          if (a.softcap > 0.f) x = a.softcap * std::tanh(x / a.softcap);
          if (a.alibi_slopes.defined())
            x -= ref::load_float(a.alibi_slopes, h * a.alibi_slopes.stride[0]) *
                 static_cast<double>(std::llabs(p - j));
          s[j] = x;
          m = std::max(m, x);
          any = true;
        }
        if (!any) continue;  // O = 0, LSE = -inf
        double sink = kNegInf;
        if (a.sinks.defined()) sink = ref::load_float(a.sinks, h * a.sinks.stride[0]);
        m = std::max(m, sink);
        double denom = std::exp(sink - m);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < sk; ++j) {
          if (s[j] == kNegInf) continue;
          const double w = std::exp(s[j] - m);
          denom += w;
          const double wv = w * kv_scale(a.v_scale, b, j, hk);
          const int64_t v_off = key_off(a.v, b, j, hk);
          for (int64_t d = 0; d < dv; ++d)
            acc[d] += wv * ref::load_float(a.v, v_off + d * a.v.stride_of(-1));
        }
        for (int64_t d = 0; d < dv; ++d) (*o)[(row * hq + h) * dv + d] = acc[d] / denom;
        if (lse) (*lse)[row * hq + h] = m + std::log(denom);
      }
    }
  }
  return Status::Ok();
}

Status naive_merge_states(const MergeStatesArgs& a, std::vector<double>* o,
                          std::vector<double>* lse) {
  for (const TensorView* t : {&a.o_parts, &a.lse_parts})
    if (!on_host(*t)) return Status::Invalid("naive_merge_states reads host tensors only");
  const int64_t n = a.o_parts.shape[0], t = a.o_parts.shape[1], h = a.o_parts.shape[2],
                d = a.o_parts.shape[3];
  o->assign(static_cast<size_t>(t * h * d), 0.0);
  if (lse) lse->assign(static_cast<size_t>(t * h), kNegInf);
  for (int64_t ti = 0; ti < t; ++ti) {
    for (int64_t hi = 0; hi < h; ++hi) {
      double m = kNegInf;
      for (int64_t ni = 0; ni < n; ++ni)
        m = std::max<double>(m, ref::load_float(a.lse_parts, off(a.lse_parts, {ni, ti, hi})));
      if (m == kNegInf) continue;  // every state empty
      double total = 0;
      for (int64_t ni = 0; ni < n; ++ni)
        total += std::exp(ref::load_float(a.lse_parts, off(a.lse_parts, {ni, ti, hi})) - m);
      const double out_lse = m + std::log(total);
      for (int64_t ni = 0; ni < n; ++ni) {
        const double l = ref::load_float(a.lse_parts, off(a.lse_parts, {ni, ti, hi}));
        if (l == kNegInf) continue;  // its O may be anything, even NaN
        const double w = std::exp(l - out_lse);
        const int64_t base = off(a.o_parts, {ni, ti, hi});
        for (int64_t di = 0; di < d; ++di)
          (*o)[(ti * h + hi) * d + di] +=
              w * ref::load_float(a.o_parts, base + di * a.o_parts.stride[3]);
      }
      if (lse) (*lse)[ti * h + hi] = out_lse;
    }
  }
  return Status::Ok();
}

}  // namespace attnkit::testkit
