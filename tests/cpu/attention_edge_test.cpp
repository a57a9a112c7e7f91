// The edge shapes of docs/design.md on the CPU backend: empty sequences, Sq > Sk, one token,
// prime lengths, rows masked out by a window, large logits, very uneven batches; plus the results
// that must not depend on num_splits or on the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/cpu_attention_util.h"

namespace attnkit::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every (row, head) of `rows` in a batched [B, Sq, Hq, Dv] / ragged [T, Hq, Dv] output: O == 0 and
// LSE == -inf. `rows` are flat output rows (b * Sq + i, or the ragged row).
void expect_empty_rows(const AttnData& d, const std::vector<int64_t>& rows) {
  const std::vector<float> o = read_back(d.o), lse = read_back(d.lse);
  const int64_t hq = d.c.hq, dv = d.c.dv;
  for (int64_t row : rows) {
    for (int64_t h = 0; h < hq; ++h) {
      for (int64_t x = 0; x < dv; ++x) ASSERT_EQ(o[(row * hq + h) * dv + x], 0.f) << "row " << row;
      if (d.c.lse) ASSERT_EQ(lse[row * hq + h], -kInf) << "row " << row;
    }
  }
}

TEST(CpuAttentionEdge, ZeroLengthSequences) {
  for (KvKind kv : {KvKind::kRagged, KvKind::kPaged, KvKind::kSeqused}) {
    AttnCase c;
    c.ragged_q = true;
    c.kv = kv;
    c.seqlens_q = {0, 5, 0, 9, 3};
    c.seqlens_k = {7, 0, 0, 12, 30};  // sequence 1: queries but no keys
    c.hq = 4;
    c.hkv = 2;
    c.mask = Mask::causal();
    c.sinks = true;  // a sink alone is no visible key: still O = 0, LSE = -inf
    c.seed = 11;
    expect_cpu_matches_naive(c);
    AttnData d = make_attn_data(c);
    ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());
    expect_empty_rows(d, {0, 1, 2, 3, 4});
  }
}

TEST(CpuAttentionEdge, AllSequencesEmpty) {
  AttnCase c;
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {0, 0};
  c.seqlens_k = {0, 4};
  c.q_tail_rows = 2;  // rows that belong to no sequence
  AttnData d = make_attn_data(c);
  ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());
  expect_empty_rows(d, {0, 1});
}

// Sq > Sk with a causal mask: the first Sq - Sk rows sit before key 0 and see nothing.
TEST(CpuAttentionEdge, MoreQueriesThanKeysCausal) {
  for (KvKind kv : {KvKind::kContiguous, KvKind::kPaged}) {
    AttnCase c = AttnCase::uniform(2, 20, 8);
    c.kv = kv;
    c.page_size = 3;
    c.mask = Mask::causal();
    c.hq = 2;
    c.hkv = 1;
    c.seed = 12;
    expect_cpu_matches_naive(c);
    AttnData d = make_attn_data(c);
    ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());
    std::vector<int64_t> rows;
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 12; ++i) rows.push_back(b * 20 + i);
    expect_empty_rows(d, rows);
    // Row 12 sees exactly key 0: O equals v[b, 0] rounded to the dtype.
    const std::vector<float> o = read_back(d.o), v = read_back(d.v);
    for (int x = 0; x < c.dv && kv == KvKind::kContiguous; ++x)
      EXPECT_EQ(o[(12 * c.hq) * c.dv + x], v[x]);
  }
}

TEST(CpuAttentionEdge, OneToken) {
  for (Mask mask : {Mask::none(), Mask::causal()}) {
    AttnCase c = AttnCase::uniform(1, 1, 1);
    c.mask = mask;
    c.seed = 13;
    expect_cpu_matches_naive(c);
  }
  // Decode: one query against many keys, GQA heads packed into one work item.
  for (KvKind kv : {KvKind::kPaged, KvKind::kSeqused}) {
    AttnCase c;
    c.seqlens_q = {1, 1, 1};
    c.seqlens_k = {1000, 1, 333};
    c.kv = kv;
    c.hq = 16;
    c.hkv = 2;
    c.mask = Mask::causal();
    c.sinks = true;
    c.seed = 14;
    expect_cpu_matches_naive(c);
  }
}

TEST(CpuAttentionEdge, PrimeLengths) {
  for (auto [sq, sk, mask] : {std::tuple{1013, 777, Mask::causal()}, std::tuple{777, 1013, Mask::causal()},
                              std::tuple{1013, 1013, Mask::sliding_window(100, 0)}}) {
    AttnCase c = AttnCase::uniform(1, sq, sk);
    c.mask = mask;
    c.hq = 2;
    c.hkv = 1;
    c.seed = 15;
    expect_cpu_matches_naive(c);
  }
}

// Rows whose window lies entirely before key 0 (Sq > Sk) or whose chunk holds no key.
TEST(CpuAttentionEdge, RowsMaskedByWindow) {
  AttnCase c = AttnCase::uniform(1, 12, 5);
  c.mask = Mask::sliding_window(3, 1);  // p = i - 7; rows 0..5 have p + 1 < 0
  c.sinks = true;
  c.seed = 16;
  expect_cpu_matches_naive(c);
  AttnData d = make_attn_data(c);
  ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());
  expect_empty_rows(d, {0, 1, 2, 3, 4, 5});

  AttnCase ch = AttnCase::uniform(1, 10, 6);
  ch.mask = Mask::chunked(4);  // p = i - 4: rows 0..3 are in chunk -1, which holds no key
  ch.seed = 17;
  expect_cpu_matches_naive(ch);
  AttnData dc = make_attn_data(ch);
  ASSERT_TRUE(attention_forward(dc.args(), cpu_opts()).ok());
  expect_empty_rows(dc, {0, 1, 2, 3});
}

// q and k times 30: scores in the thousands, far past exp's fp32 range. The fp32 error of a score
// is about eps * |score|, so the tolerances are relative to the magnitudes involved.
TEST(CpuAttentionEdge, LargeLogits) {
  int n = 0;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    for (float softcap : {0.f, 50.f}) {
      AttnCase c = AttnCase::uniform(2, 70, 90);
      c.dtype = dt;
      c.qk_scale = 30.f;
      c.softcap = softcap;
      c.mask = Mask::causal();
      c.sinks = n % 2 == 1;
      c.seed = 18 + n++;
      SCOPED_TRACE(c.str());
      AttnData d = make_attn_data(c);
      ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());
      const Reference ref = naive_reference(d);
      const testkit::Tolerance o_tol =
          dt == DType::kFloat32 ? testkit::Tolerance{1e-4, 1e-2} : cpu_o_tolerance(dt);
      expect_matches(d, ref, o_tol, {1e-6, 1e-2});
      for (float x : read_back(d.lse)) EXPECT_TRUE(std::isfinite(x));
    }
  }
}

TEST(CpuAttentionEdge, UnevenVarlenBatch) {
  for (KvKind kv : {KvKind::kRagged, KvKind::kPaged}) {
    AttnCase c;
    c.ragged_q = true;
    c.kv = kv;
    c.page_size = 48;
    c.seqlens_q = {1, 300, 2, 0, 77, 5};
    c.seqlens_k = {500, 300, 1, 3, 77, 900};
    c.hq = 4;
    c.hkv = 1;
    c.mask = Mask::causal();
    c.alibi = true;
    c.seed = 20;
    expect_cpu_matches_naive(c);
  }
}

TEST(CpuAttentionEdge, RaggedQTailRowsAreEmpty) {
  AttnCase c;
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {3, 4};
  c.seqlens_k = {5, 6};
  c.q_tail_rows = 3;
  c.seed = 21;
  expect_cpu_matches_naive(c);
  AttnData d = make_attn_data(c);
  ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());
  expect_empty_rows(d, {7, 8, 9});
}

// num_splits is a GPU concern, and rows never share arithmetic across threads: the CPU result is
// the same bits whatever either is.
TEST(CpuAttentionEdge, NumSplitsAndThreadsDoNotChangeResult) {
  AttnCase c;
  c.ragged_q = true;
  c.kv = KvKind::kPaged;
  c.seqlens_q = {130, 1, 64};
  c.seqlens_k = {200, 700, 64};
  c.hq = 8;
  c.hkv = 2;
  c.mask = Mask::sliding_window(90, 0);
  c.sinks = true;
  AttnData base = make_attn_data(c);
  ASSERT_TRUE(attention_forward(base.args(), cpu_opts(1)).ok());
  for (int splits : {0, 1, 2, 7, 64}) {
    for (int threads : {1, 2, 3}) {
      AttnData d = make_attn_data(c);
      d.c.num_splits = splits;
      ASSERT_TRUE(attention_forward(d.args(), cpu_opts(threads)).ok());
      EXPECT_EQ(0, std::memcmp(d.o.buf.data(), base.o.buf.data(), base.o.buf.bytes()))
          << "num_splits " << splits << " threads " << threads;
      EXPECT_EQ(0, std::memcmp(d.lse.buf.data(), base.lse.buf.data(), base.lse.buf.bytes()))
          << "num_splits " << splits << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace attnkit::test
