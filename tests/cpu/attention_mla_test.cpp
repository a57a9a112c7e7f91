// Multi-head latent attention (DeepSeek-V3 / Kimi-K2 decode) through attention_forward on the
// CPU: Q [B, Sq, Hq, 576], a paged latent cache [num_pages, 64, 1, 576] read as K, and V a view of
// its first 512 values (the same memory), O [B, Sq, Hq, 512]; uneven lengths, one and two new
// tokens per sequence (causal among them), DeepSeek's explicit scale. The CPU backend agrees with
// the naive fp64 reference; cache slots no key uses hold NaN and must not be read. Other widths
// than 576 / 512 stay refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attnkit/attention.h"
#include "testkit/buffer.h"
#include "testkit/compare.h"
#include "testkit/naive.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

struct MlaCase {
  std::vector<int> seqlens{1, 130, 700};
  int sq = 1, hq = 16, page = 64;
};

void check_mla(const MlaCase& c, uint64_t seed) {
  SCOPED_TRACE("sq " + std::to_string(c.sq) + " hq " + std::to_string(c.hq));
  std::mt19937_64 rng(seed);
  const int64_t b = static_cast<int64_t>(c.seqlens.size());
  int64_t max_pages = 0, pages = 0;
  for (int s : c.seqlens) {
    max_pages = std::max<int64_t>(max_pages, (s + c.page - 1) / c.page);
    pages += (s + c.page - 1) / c.page;
  }
  pages += 2;  // spare pages nobody uses
  Buffer q(DType::kBFloat16, {b, c.sq, c.hq, 576});
  Buffer cache(DType::kBFloat16, {pages, c.page, 1, 576});
  testkit::fill_normal(q, rng, 0.f, 1.f);
  cache.poison();  // NaN in every slot no key fills
  {
    std::vector<float> v(static_cast<size_t>(cache.numel()));
    std::normal_distribution<float> nd(0.f, 1.f);
    for (float& x : v) x = nd(rng);
    std::vector<float> cur = cache.to_float();
    // Pages are handed out in reverse, so that a sequence's pages are not consecutive.
    std::vector<int32_t> table(static_cast<size_t>(b * max_pages), 0);
    int64_t next = pages - 1;
    for (int64_t s = 0; s < b; ++s)
      for (int64_t p = 0; p < (c.seqlens[s] + c.page - 1) / c.page; ++p) {
        table[s * max_pages + p] = static_cast<int32_t>(next);
        const int64_t used = std::min<int64_t>(c.page, c.seqlens[s] - p * c.page);
        for (int64_t r = 0; r < used; ++r)
          for (int64_t d = 0; d < 576; ++d) {
            const size_t i = static_cast<size_t>((next * c.page + r) * 576 + d);
            cur[i] = v[i];
          }
        --next;
      }
    cache.from_float(cur);
    Buffer pt(DType::kInt32, {b, max_pages}), used(DType::kInt32, {b});
    pt.from_int(table);
    used.from_int(std::vector<int32_t>(c.seqlens.begin(), c.seqlens.end()));

    Buffer o(DType::kBFloat16, {b, c.sq, c.hq, 512}), lse(DType::kFloat32, {b, c.sq, c.hq});
    o.poison();
    AttentionArgs a;
    a.q = q.view();
    a.k = cache.view();
    a.v = cache.view();
    a.v.shape[3] = 512;  // the latent part of the same cache
    a.page_table = pt.view();
    a.seqused_k = used.view();
    a.o = o.view();
    a.lse = lse.view();
    a.scale = 1.f / std::sqrt(192.f);  // DeepSeek-V3: the scale of its 192-wide q/k heads
    a.mask = Mask::causal();
    ExecOptions cpu;
    cpu.backend = Backend::kCPU;
    const Status st = attention_forward(a, cpu);
    ASSERT_TRUE(st.ok()) << st.message();

    std::vector<double> want_o, want_lse;
    ASSERT_TRUE(testkit::naive_attention(a, &want_o, &want_lse).ok());
    const testkit::ErrorStats eo =
        testkit::compare(o.to_float(), std::vector<float>(want_o.begin(), want_o.end()));
    EXPECT_TRUE(testkit::within(eo, testkit::kAttnBf16)) << "O: " << eo.str();
    const testkit::ErrorStats el =
        testkit::compare(lse.to_float(), std::vector<float>(want_lse.begin(), want_lse.end()));
    EXPECT_TRUE(testkit::within(el, testkit::kLse)) << "LSE: " << el.str();
  }
}

TEST(AttentionMla, PagedLatentCacheReadAsKAndV) {
  MlaCase c;
  check_mla(c, 1);
  c.sq = 2;  // multi-token prediction: two new tokens, causal among them
  c.hq = 32;
  check_mla(c, 2);
  c.page = 16;
  c.hq = 128;
  c.seqlens = {33, 1, 300, 64};
  check_mla(c, 3);
}

TEST(AttentionMla, OnlyTheMlaPairOfWidths) {
  Buffer q(DType::kBFloat16, {1, 1, 4, 576}), k(DType::kBFloat16, {1, 8, 1, 576});
  Buffer v(DType::kBFloat16, {1, 8, 1, 256}), o(DType::kBFloat16, {1, 1, 4, 256});
  AttentionArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.o = o.view();
  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  const Status st = attention_forward(a, cpu);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("576 with v 512"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace attnkit::test
