// Random attention_forward test cases from a small description (AttnCase): the host buffers of
// every input, poisoned outputs, and the AttentionArgs viewing them. Device-agnostic: build on the
// host with make_attn_data, then `to(cuda())` for a GPU run; read outputs back with read_view.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attnkit/attention.h"
#include "cpu/half.h"
#include "testkit/buffer.h"

namespace attnkit::test {

enum class KvKind { kContiguous, kSeqused, kRagged, kPaged };

inline const char* to_string(KvKind k) {
  switch (k) {
    case KvKind::kContiguous: return "contig";
    case KvKind::kSeqused: return "contig+seqused";
    case KvKind::kRagged: return "ragged";
    case KvKind::kPaged: return "paged";
  }
  return "?";
}

// Aborts on a malformed case (active in release builds too, unlike assert).
inline void case_require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "attention test case: %s\n", what);
  std::abort();
}

struct AttnCase {
  DType dtype = DType::kBFloat16;
  // One entry per sequence. Batched Q (ragged_q false) needs all seqlens_q equal; contiguous KV
  // (kContiguous) needs all seqlens_k equal.
  std::vector<int> seqlens_q{16};
  std::vector<int> seqlens_k{16};
  bool ragged_q = false;
  KvKind kv = KvKind::kContiguous;
  int page_size = 16;
  int hq = 2, hkv = 1, dqk = 64, dv = 64;
  Mask mask{};
  float softcap = 0.f;
  bool alibi = false, sinks = false, lse = true;
  float scale = 0.f;
  int num_splits = 0;
  float qk_scale = 1.f;   // multiplies q and k: > 1 gives large logits
  // Multiplies v: < 1 keeps O small where large logits make it close to single V rows (whose bf16
  // rounding steps would otherwise exceed the max-abs bound of the comparison).
  float v_scale = 1.f;
  bool strided = false;   // q/k/v/o rows padded and lse transposed, to exercise strides
  int row_pad = 8;        // strided: elements of padding per row (8 keep 16-bit rows 16-byte
                          // aligned; an FP8 cache needs 16)
  bool v_strided_apart = false;  // V rows padded 8 elements more than K's: K and V strided apart
  int q_tail_rows = 0;    // ragged q: rows past cu_seqlens_q[B] that belong to no sequence
  bool invalid_page_padding = false;  // page_table entries past the used pages are -1
  uint64_t seed = 1;

  static AttnCase uniform(int batch, int sq, int sk) {
    AttnCase c;
    c.seqlens_q.assign(batch, sq);
    c.seqlens_k.assign(batch, sk);
    return c;
  }
  int batch() const { return static_cast<int>(seqlens_q.size()); }

  std::string str() const {
    std::ostringstream os;
    os << attnkit::to_string(dtype) << " B=" << batch() << " sq=[";
    for (size_t i = 0; i < seqlens_q.size(); ++i) os << (i ? "," : "") << seqlens_q[i];
    os << "] sk=[";
    for (size_t i = 0; i < seqlens_k.size(); ++i) os << (i ? "," : "") << seqlens_k[i];
    os << "] " << (ragged_q ? "ragged-q" : "batched-q") << " kv=" << to_string(kv);
    if (kv == KvKind::kPaged) os << "(page " << page_size << ")";
    os << " hq=" << hq << " hkv=" << hkv << " d=" << dqk << "/" << dv << " mask=("
       << mask.window_left << "," << mask.window_right << "," << mask.chunk_size << ")";
    if (softcap > 0) os << " softcap=" << softcap;
    if (alibi) os << " alibi";
    if (sinks) os << " sinks";
    if (!lse) os << " no-lse";
    if (scale != 0) os << " scale=" << scale;
    if (num_splits) os << " splits=" << num_splits;
    if (qk_scale != 1) os << " qk*" << qk_scale;
    if (v_scale != 1) os << " v*" << v_scale;
    if (strided) os << " strided";
    if (v_strided_apart) os << " v-strided-apart";
    os << " seed=" << seed;
    return os.str();
  }
};

// A buffer and the (possibly strided, possibly narrower) view of it that the op sees.
struct ViewedBuffer {
  testkit::Buffer buf;
  TensorView view;  // data points into buf; shape/strides describe the logical tensor

  bool defined() const { return view.defined(); }
  ViewedBuffer to(Device dev) const {
    ViewedBuffer r;
    if (!defined()) return r;
    r.buf = buf.to(dev);
    r.view = view;
    r.view.data = r.buf.data();
    r.view.device = dev;
    return r;
  }
};

// A contiguous buffer viewed whole.
inline ViewedBuffer whole(DType dt, std::vector<int64_t> shape) {
  ViewedBuffer r;
  r.buf = testkit::Buffer(dt, std::move(shape));
  r.view = r.buf.view();
  return r;
}

// A buffer whose last dimension is padded by `pad` elements; the view hides the padding.
inline ViewedBuffer padded_rows(DType dt, std::vector<int64_t> shape, int64_t pad) {
  std::vector<int64_t> alloc = shape;
  alloc.back() += pad;
  ViewedBuffer r;
  r.buf = testkit::Buffer(dt, alloc);
  r.view = r.buf.view();
  r.view.shape[r.view.ndim - 1] = shape.back();
  return r;
}

// Logical elements of a host view, row-major, as float (int32 converted too).
inline std::vector<float> read_view(const TensorView& t) {
  std::vector<float> out;
  if (!t.defined()) return out;
  const int64_t n = t.numel();
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(t.ndim, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int d = 0; d < t.ndim; ++d) off += idx[d] * t.stride[d];
    out.push_back(t.dtype == DType::kInt32 ? static_cast<float>(static_cast<const int32_t*>(t.data)[off])
                                           : ref::load_float(t, off));
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Logical elements of a ViewedBuffer on any device.
inline std::vector<float> read_back(const ViewedBuffer& vb) {
  if (!vb.defined()) return {};
  if (vb.view.device.type == DeviceType::kCPU) return read_view(vb.view);
  const ViewedBuffer host = vb.to(cpu());
  return read_view(host.view);
}

struct AttnData {
  AttnCase c;
  ViewedBuffer q, k, v, cu_q, cu_k, page_table, seqused_k, alibi, sinks, o, lse;
  ViewedBuffer q_scale, k_scale, v_scale;  // FP8 Q / K / V only (fp8_kv.h)

  AttentionArgs args() const {
    AttentionArgs a;
    a.q = q.view;
    a.k = k.view;
    a.v = v.view;
    a.cu_seqlens_q = cu_q.view;
    a.cu_seqlens_k = cu_k.view;
    a.page_table = page_table.view;
    a.seqused_k = seqused_k.view;
    a.alibi_slopes = alibi.view;
    a.sinks = sinks.view;
    a.q_scale = q_scale.view;
    a.k_scale = k_scale.view;
    a.v_scale = v_scale.view;
    a.o = o.view;
    a.lse = lse.view;
    a.scale = c.scale;
    a.mask = c.mask;
    a.softcap = c.softcap;
    a.num_splits = c.num_splits;
    return a;
  }

  AttnData to(Device dev) const {
    AttnData r;
    r.c = c;
    r.q = q.to(dev); r.k = k.to(dev); r.v = v.to(dev);
    r.cu_q = cu_q.to(dev); r.cu_k = cu_k.to(dev);
    r.page_table = page_table.to(dev); r.seqused_k = seqused_k.to(dev);
    r.alibi = alibi.to(dev); r.sinks = sinks.to(dev);
    r.q_scale = q_scale.to(dev); r.k_scale = k_scale.to(dev); r.v_scale = v_scale.to(dev);
    r.o = o.to(dev); r.lse = lse.to(dev);
    return r;
  }

  // Fills the whole output buffers (padding included) with NaN.
  void poison_outputs() {
    o.buf.poison();
    if (lse.defined()) lse.buf.poison();
  }
};

// Builds the case: random q/k/v ~ N(0, 1) (q and k times qk_scale, v times v_scale), rounded to the dtype; index
// tensors for the layout (ragged tensors and KV caches get spare rows/pages the op must ignore);
// poisoned outputs.
inline AttnData make_attn_data(const AttnCase& c) {
  const int batch = c.batch();
  case_require(static_cast<int>(c.seqlens_k.size()) == batch, "seqlens_k needs one entry per sequence");
  std::mt19937_64 rng(c.seed);
  AttnData d;
  d.c = c;
  const int64_t pad = c.strided ? c.row_pad : 0;
  auto make = [&](std::vector<int64_t> shape) {
    return c.strided ? padded_rows(c.dtype, std::move(shape), pad) : whole(c.dtype, std::move(shape));
  };
  auto int_tensor = [](const std::vector<int32_t>& vals, std::vector<int64_t> shape) {
    ViewedBuffer r = whole(DType::kInt32, std::move(shape));
    r.buf.from_int(vals);
    return r;
  };
  auto prefix = [](const std::vector<int>& lens) {
    std::vector<int32_t> cu(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); ++i) cu[i + 1] = cu[i] + lens[i];
    return cu;
  };

  // ---- Q and O
  int64_t q_rows;
  if (c.ragged_q) {
    const std::vector<int32_t> cu = prefix(c.seqlens_q);
    q_rows = cu.back() + c.q_tail_rows;
    d.cu_q = int_tensor(cu, {batch + 1});
    d.q = make({q_rows, c.hq, c.dqk});
    d.o = make({q_rows, c.hq, c.dv});
  } else {
    for (int s : c.seqlens_q) case_require(s == c.seqlens_q[0], "batched q needs equal seqlens_q");
    q_rows = batch ? c.seqlens_q[0] : 0;
    d.q = make({batch, q_rows, c.hq, c.dqk});
    d.o = make({batch, q_rows, c.hq, c.dv});
  }
  if (c.lse) {
    // Transposed when strided: heads outermost.
    if (c.ragged_q) {
      d.lse = whole(DType::kFloat32, c.strided ? std::vector<int64_t>{c.hq, q_rows}
                                               : std::vector<int64_t>{q_rows, c.hq});
      d.lse.view.shape = {q_rows, c.hq};
      d.lse.view.stride = c.strided ? decltype(d.lse.view.stride){1, q_rows}
                                    : decltype(d.lse.view.stride){c.hq, 1};
    } else {
      d.lse = whole(DType::kFloat32, c.strided ? std::vector<int64_t>{batch, c.hq, q_rows}
                                               : std::vector<int64_t>{batch, q_rows, c.hq});
      d.lse.view.shape = {batch, q_rows, c.hq};
      d.lse.view.stride = c.strided ? decltype(d.lse.view.stride){c.hq * q_rows, 1, q_rows}
                                    : decltype(d.lse.view.stride){q_rows * c.hq, c.hq, 1};
    }
  }

  // ---- K and V
  const int max_k = batch ? *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end()) : 0;
  std::vector<int64_t> kv_shape;  // all but the head dim
  switch (c.kv) {
    case KvKind::kContiguous:
      for (int s : c.seqlens_k) case_require(s == max_k, "contiguous KV needs equal seqlens_k");
      kv_shape = {batch, max_k, c.hkv};
      break;
    case KvKind::kSeqused:
      kv_shape = {batch, max_k + 5, c.hkv};  // a cache with room to spare
      d.seqused_k = int_tensor(std::vector<int32_t>(c.seqlens_k.begin(), c.seqlens_k.end()), {batch});
      break;
    case KvKind::kRagged: {
      const std::vector<int32_t> cu = prefix(c.seqlens_k);
      kv_shape = {cu.back() + 3, c.hkv};
      d.cu_k = int_tensor(cu, {batch + 1});
      break;
    }
    case KvKind::kPaged: {
      std::vector<int> pages(batch);
      int total = 0, max_pages = 1;
      for (int b = 0; b < batch; ++b) {
        pages[b] = (c.seqlens_k[b] + c.page_size - 1) / c.page_size;
        total += pages[b];
        max_pages = std::max(max_pages, pages[b] + 1);
      }
      const int num_pages = total + 2;  // spare pages nobody uses
      std::vector<int32_t> ids(num_pages);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);  // pages out of order
      std::vector<int32_t> table(static_cast<size_t>(batch) * max_pages);
      std::uniform_int_distribution<int32_t> any_page(0, num_pages - 1);
      int next = 0;
      for (int b = 0; b < batch; ++b)
        for (int i = 0; i < max_pages; ++i)
          table[b * max_pages + i] = i < pages[b]              ? ids[next++]
                                     : c.invalid_page_padding ? -1
                                                              : any_page(rng);
      d.page_table = int_tensor(table, {batch, max_pages});
      d.seqused_k = int_tensor(std::vector<int32_t>(c.seqlens_k.begin(), c.seqlens_k.end()), {batch});
      kv_shape = {num_pages, c.page_size, c.hkv};
      break;
    }
  }
  std::vector<int64_t> k_shape = kv_shape, v_shape = kv_shape;
  k_shape.push_back(c.dqk);
  v_shape.push_back(c.dv);
  d.k = make(k_shape);
  d.v = c.v_strided_apart ? padded_rows(c.dtype, v_shape, pad + 8) : make(v_shape);

  testkit::fill_normal(d.q.buf, rng, 0.f, c.qk_scale);
  testkit::fill_normal(d.k.buf, rng, 0.f, c.qk_scale);
  testkit::fill_normal(d.v.buf, rng, 0.f, c.v_scale);
  if (c.alibi) {
    d.alibi = whole(DType::kFloat32, {c.hq});
    testkit::fill_uniform(d.alibi.buf, rng, 0.01f, 0.5f);
  }
  if (c.sinks) {
    d.sinks = whole(DType::kFloat32, {c.hq});
    testkit::fill_uniform(d.sinks.buf, rng, -2.f, 4.f);
  }
  d.poison_outputs();
  return d;
}

}  // namespace attnkit::test
