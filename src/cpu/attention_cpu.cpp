// CPU reference backend for attention_forward: fp32 accumulation with an online softmax, threads
// over (sequence, q head, block of query rows).
//
// Each work item converts Q rows once, then walks the keys its rows can see in tiles: a tile of K
// (transposed) and V is converted to fp32 once and shared by all rows of the block, so the inner
// loops are contiguous fp32 loops the compiler vectorises. Keys outside a row's mask window are never
// touched: each row's visible range is computed in closed form.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "api/backends.h"
#include "cpu/half.h"
#include "cpu/parallel.h"
#include "cpu/rows.h"
#include "cpu/tile_matmul.h"

namespace attnkit::detail {
namespace {

constexpr int64_t kBlockRows = 64;  // query rows per work item
constexpr int64_t kKeyTile = 64;    // keys converted to fp32 at a time (a multiple of 8)
constexpr int64_t kGroupRows = 4;   // rows sharing each K/V element loaded by the inner kernel
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Blocks of chunk_size positions start at multiples of it: position -1 lies in block -1.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Keys [lo, hi) visible from position p (see Mask); lo == hi == 0 when none is.
struct KeyRange {
  int64_t lo = 0, hi = 0;
  bool empty() const { return lo >= hi; }
};

KeyRange visible_keys(const Mask& m, int64_t p, int64_t sk) {
  int64_t lo = 0, hi = sk;
  if (m.window_left >= 0) lo = std::max(lo, p - m.window_left);
  if (m.window_right >= 0) hi = std::min(hi, p + m.window_right + 1);
  if (m.chunk_size > 0) {
    const int64_t c0 = floor_div(p, m.chunk_size) * m.chunk_size;
    lo = std::max(lo, c0);
    hi = std::min(hi, c0 + m.chunk_size);
  }
  if (lo >= hi) return {};
  return {lo, hi};
}

// Query rows [row0, row0 + rows) of heads [h0, h0 + heads) of sequence b; all heads share one kv
// head. Short sequences (decode) pack several heads into one item so K/V are converted once for
// them all.
struct WorkItem {
  int b;
  int h0, heads;
  int64_t row0, rows;
};

// Per block row (a query row of one head): what the tile loop needs without recomputing it.
struct RowInfo {
  KeyRange keys;    // visible keys
  int64_t pos = 0;  // diagonal position p = i + Sk - Sq
  float slope = 0;  // ALiBi slope of its head
};

struct Scratch {
  std::vector<float> q, kt, v, acc, s, row, m, l;
  void resize(int64_t dqk, int64_t dv) {
    q.resize(kBlockRows * dqk);
    kt.resize(dqk * kKeyTile);
    v.resize(kKeyTile * dv);
    acc.resize(kBlockRows * dv);
    s.resize(kGroupRows * kKeyTile);
    row.resize(std::max(dqk, dv));
    m.resize(kBlockRows);
    l.resize(kBlockRows);
  }
};

// The fp32 scale of an e4m3 row (attention.h): key j of KV head hk (K / V), or query i of head h
// (Q; its KV head hk), of sequence b. Per-token offsets follow the tensor's own rows.
float kv_scale_at(const TensorView& s, KvScaleKind kind, const ref::SeqRows& rows, int b, int64_t j,
                  int hk) {
  const float* d = static_cast<const float*>(s.data);
  switch (kind) {
    case KvScaleKind::kHead: return d[hk * s.stride[0]];
    case KvScaleKind::kToken: return d[rows.kv(s, j, hk)];
    case KvScaleKind::kBatchHead: return d[b * s.stride[0] + hk * s.stride[1]];
    default: return d[0];
  }
}
float q_scale_at(const TensorView& s, KvScaleKind kind, const ref::SeqRows& rows, int b, int64_t i,
                 int h, int hk) {
  const float* d = static_cast<const float*>(s.data);
  switch (kind) {
    case KvScaleKind::kHead: return d[h * s.stride[0]];
    case KvScaleKind::kToken: return d[rows.q(s, i, h)];
    case KvScaleKind::kBatchHead: return d[b * s.stride[0] + hk * s.stride[1]];
    default: return d[0];
  }
}
void scale_row(float f, int64_t n, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

class CpuAttention {
 public:
  CpuAttention(const AttentionArgs& args, const AttnProblem& prob) : a_(args), p_(prob) {}

  void run_block(const WorkItem& it, Scratch& sc) const {
    const ref::SeqRows rows(p_, it.b);
    const int hk = it.h0 / (p_.hq / p_.hkv);
    const int64_t dqk = p_.dqk, dv = p_.dv;
    const int64_t sq = p_.seqlen_q(it.b), sk = p_.seqlen_k(it.b);
    const int64_t nr = it.heads * it.rows;  // block row r: head h0 + r / rows, query row0 + r % rows
    auto head_of = [&](int64_t r) { return it.h0 + static_cast<int>(r / it.rows); };
    auto query_of = [&](int64_t r) { return it.row0 + r % it.rows; };

    RowInfo info[kBlockRows];
    int64_t block_lo = sk, block_hi = 0;
    for (int64_t r = 0; r < nr; ++r) {
      info[r].pos = query_of(r) + sk - sq;
      info[r].keys = visible_keys(p_.mask, info[r].pos, sk);
      if (p_.has_alibi) info[r].slope = head_vector(a_.alibi_slopes, head_of(r));
      ref::load_row(a_.q, rows.q(a_.q, query_of(r), head_of(r)), dqk, &sc.q[r * dqk]);
      if (p_.q_fp8)
        scale_row(q_scale_at(a_.q_scale, p_.q_scale, rows, it.b, query_of(r), head_of(r), hk), dqk,
                  &sc.q[r * dqk]);
      if (info[r].keys.empty()) continue;
      block_lo = std::min(block_lo, info[r].keys.lo);
      block_hi = std::max(block_hi, info[r].keys.hi);
    }
    std::fill(sc.m.begin(), sc.m.end(), kNegInf);
    std::fill(sc.l.begin(), sc.l.end(), 0.f);
    std::fill(sc.acc.begin(), sc.acc.end(), 0.f);

    for (int64_t t0 = block_lo; t0 < block_hi; t0 += kKeyTile) {
      const int64_t t1 = std::min(t0 + kKeyTile, block_hi);
      bool used = false;  // chunked masks can leave whole tiles between the rows' ranges
      for (int64_t r = 0; r < nr && !used; ++r)
        used = std::max(info[r].keys.lo, t0) < std::min(info[r].keys.hi, t1);
      if (!used) continue;
      for (int64_t j = t0; j < t1; ++j) {
        ref::load_row(a_.k, rows.kv(a_.k, j, hk), dqk, sc.row.data());
        if (p_.kv_fp8) scale_row(kv_scale_at(a_.k_scale, p_.k_scale, rows, it.b, j, hk), dqk, sc.row.data());
        for (int64_t d = 0; d < dqk; ++d) sc.kt[d * kKeyTile + (j - t0)] = sc.row[d];
        float* v = &sc.v[(j - t0) * dv];
        ref::load_row(a_.v, rows.kv(a_.v, j, hk), dv, v);
        if (p_.kv_fp8) scale_row(kv_scale_at(a_.v_scale, p_.v_scale, rows, it.b, j, hk), dv, v);
      }
      for (int64_t g = 0; g < nr; g += kGroupRows)
        update_group(sc, g, std::min(kGroupRows, nr - g), info, t0, t1);
    }

    for (int64_t r = 0; r < nr; ++r) {
      const int h = head_of(r);
      const int64_t i = query_of(r);
      float* acc = &sc.acc[r * dv];
      float lse = kNegInf;
      if (info[r].keys.empty()) {
        std::fill(acc, acc + dv, 0.f);
      } else {
        // Fold the sink into the denominator in a frame where neither term overflows.
        const float m = sc.m[r];
        const float sink = p_.has_sinks ? head_vector(a_.sinks, h) : kNegInf;
        const float mf = std::max(m, sink);
        const float c = std::exp(m - mf);
        const float denom = sc.l[r] * c + std::exp(sink - mf);
        const float inv = c / denom;
        for (int64_t d = 0; d < dv; ++d) acc[d] *= inv;
        lse = mf + std::log(denom);
      }
      const int64_t o_off = rows.q(a_.o, i, h);
      for (int64_t d = 0; d < dv; ++d) ref::store_float(a_.o, o_off + d, acc[d]);
      if (p_.has_lse) static_cast<float*>(a_.lse.data)[rows.q(a_.lse, i, h)] = lse;
    }
  }

 private:
  static float head_vector(const TensorView& t, int h) { return ref::load_float(t, h * t.stride[0]); }

  // Online-softmax update of block rows [g, g + n) with the keys [t0, t1) of the current tile
  // (already in sc.kt / sc.v). The group's scores are computed over the union of its rows'
  // visible keys; a row's probabilities are zero outside its own range.
  void update_group(Scratch& sc, int64_t g, int64_t n, const RowInfo* info, int64_t t0,
                    int64_t t1) const {
    const int64_t dqk = p_.dqk, dv = p_.dv;
    int64_t ulo = kKeyTile, uhi = 0;  // union of the rows' ranges, relative to t0
    int64_t lo[kGroupRows], hi[kGroupRows];
    for (int64_t r = 0; r < n; ++r) {
      lo[r] = std::max(info[g + r].keys.lo, t0) - t0;
      hi[r] = std::min(info[g + r].keys.hi, t1) - t0;
      if (lo[r] >= hi[r]) continue;
      ulo = std::min(ulo, lo[r]);
      uhi = std::max(uhi, hi[r]);
    }
    if (ulo >= uhi) return;

    // Scores over whole 8-key groups; the extra columns (stale tile entries past t1 included)
    // are never read back.
    float* s = sc.s.data();
    const int64_t c0 = ulo / 8 * 8, c1 = std::min<int64_t>(kKeyTile, (uhi + 7) / 8 * 8);
    ref::matmul(static_cast<int>(n), &sc.q[g * dqk], dqk, sc.kt.data(), kKeyTile, s, kKeyTile, 0,
                dqk, c0, c1, /*accumulate=*/false);

    const float scale = p_.scale, cap = p_.softcap;
    for (int64_t r = 0; r < n; ++r) {
      float* sr = s + r * kKeyTile;
      float* acc = &sc.acc[(g + r) * dv];
      if (lo[r] >= hi[r]) {
        std::fill(sr + ulo, sr + uhi, 0.f);
        continue;
      }
      const int64_t pos = info[g + r].pos - t0;  // relative to the tile, like j
      const float slope = info[g + r].slope;
      float tile_max = kNegInf;
      for (int64_t j = lo[r]; j < hi[r]; ++j) {
        float x = sr[j] * scale;
        if (cap > 0.f) x = cap * std::tanh(x / cap);
        if (p_.has_alibi) x -= slope * static_cast<float>(std::llabs(pos - j));
        sr[j] = x;
        tile_max = std::max(tile_max, x);
      }
      const float m_old = sc.m[g + r], m_new = std::max(m_old, tile_max);
      if (m_new > m_old) {
        const float c = std::exp(m_old - m_new);  // 0 on the row's first tile
        sc.l[g + r] *= c;
        for (int64_t d = 0; d < dv; ++d) acc[d] *= c;
      }
      float l = 0.f;
      for (int64_t j = lo[r]; j < hi[r]; ++j) {
        sr[j] = std::exp(sr[j] - m_new);
        l += sr[j];
      }
      std::fill(sr + ulo, sr + lo[r], 0.f);
      std::fill(sr + hi[r], sr + uhi, 0.f);
      sc.l[g + r] += l;
      sc.m[g + r] = m_new;
    }
    // Masked keys enter with probability 0 (as in the GPU kernels, a non-finite V there would
    // still poison the row; V rows of visible keys are finite in any meaningful input).
    ref::matmul(static_cast<int>(n), s, kKeyTile, sc.v.data(), dv, &sc.acc[g * dv], dv, ulo, uhi,
                0, dv, /*accumulate=*/true);
  }

  const AttentionArgs& a_;
  const AttnProblem& p_;
};

}  // namespace

Status cpu_attention_forward(const AttentionArgs& args, const AttnProblem& prob,
                             const ExecOptions& opts) {
  if (!prob.indices_on_host) return Status::Internal("cpu attention: index tensors not on the host");
  const int group = prob.hq / prob.hkv;
  std::vector<WorkItem> items;
  for (int b = 0; b < prob.batch; ++b) {
    const int64_t sq = prob.seqlen_q(b);
    if (sq == 0) continue;
    const int64_t rows = std::min(sq, kBlockRows);
    const int heads = static_cast<int>(std::min<int64_t>(group, kBlockRows / rows));
    for (int h = 0, nh = 0; h < prob.hq; h += nh) {
      nh = std::min(heads, (h / group + 1) * group - h);  // stay within one kv head
      for (int64_t r = 0; r < sq; r += rows) items.push_back({b, h, nh, r, std::min(rows, sq - r)});
    }
  }
  const CpuAttention attn(args, prob);
  ref::parallel_for(static_cast<int64_t>(items.size()), opts.cpu_threads, [&](int64_t i) {
    thread_local Scratch sc;
    sc.resize(prob.dqk, prob.dv);
    attn.run_block(items[static_cast<size_t>(i)], sc);
  });

  // Rows of a ragged q past cu_seqlens_q[B] belong to no sequence: they see no key.
  if (prob.q_ragged) {
    for (int64_t t = prob.cu_q[prob.batch]; t < prob.q_rows; ++t) {
      for (int h = 0; h < prob.hq; ++h) {
        const int64_t o_off = t * args.o.stride[0] + h * args.o.stride[1];
        for (int64_t d = 0; d < prob.dv; ++d) ref::store_float(args.o, o_off + d, 0.f);
        if (prob.has_lse)
          static_cast<float*>(args.lse.data)[t * args.lse.stride[0] + h * args.lse.stride[1]] = kNegInf;
      }
    }
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
