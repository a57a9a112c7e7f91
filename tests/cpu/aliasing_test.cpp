// The API's aliasing promise (api/check.h, the headers' "Aliasing" notes): an output shares no
// memory with an input or another output and no two of its elements share an address; each
// violation the checks can see is refused naming both tensors, before anything is written. Dense
// views whose ranges meet are refused; strided views that interleave without sharing an element
// (slices of one fused buffer) are accepted and give the same results as separate buffers; the one
// in-place update the API allows (Gated DeltaNet's final_state = initial_state) passes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnkit/gdn.h"
#include "attnkit/kv_cache.h"
#include "cpu/cpu_attention_util.h"

namespace attnkit::test {
namespace {

void expect_invalid(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message();
}

// Batch 2, 4 queries, 8 keys, 4 / 2 heads, d 64 (AttnCase's), bf16.
AttnData small_attention() {
  AttnCase c = AttnCase::uniform(2, 4, 8);
  c.hq = 4;
  c.hkv = 2;
  return make_attn_data(c);
}

TEST(Aliasing, AttentionOutputOnAnInputIsRefused) {
  AttnData d = small_attention();
  AttentionArgs a = d.args();
  a.o.data = a.q.data;  // o and q: the same shape here ([2, 4, 4, 64]), the same bytes
  expect_invalid(attention_forward(a, cpu_opts()), "o shares memory with q");
  a = d.args();
  a.o.data = static_cast<char*>(a.k.data) + 2;  // partly over k
  a.o.dtype = a.k.dtype;
  expect_invalid(attention_forward(a, cpu_opts()), "o shares memory with k");
  a = d.args();
  a.lse.data = a.o.data;  // lse inside o
  expect_invalid(attention_forward(a, cpu_opts()), "lse shares memory with o");
}

TEST(Aliasing, OutputElementsSharingAnAddressAreRefused) {
  AttnData d = small_attention();
  AttentionArgs a = d.args();
  a.o.stride[1] = 0;  // every query row of a sequence written to one place
  expect_invalid(attention_forward(a, cpu_opts()), "o [2, 4, 4, 64] has elements that share");
  a = d.args();
  a.lse.stride[2] = 0;  // heads
  expect_invalid(attention_forward(a, cpu_opts()), "lse [2, 4, 4] has elements that share");
}

// q and o as column slices of one [B, Sq, 2 * Hq * D] buffer: their ranges interleave but no
// element is shared, so the call runs, and O matches a run with separate buffers.
TEST(Aliasing, InterleavedSlicesOfOneBufferRun) {
  AttnData d = small_attention();
  const AttentionArgs base = d.args();
  const int64_t B = 2, S = 4, HD = 4 * 64, W = 2 * HD;
  std::vector<uint16_t> fused(static_cast<size_t>(B * S * W), 0);
  for (int64_t r = 0; r < B * S; ++r)
    std::memcpy(&fused[r * W], static_cast<const uint16_t*>(base.q.data) + r * HD, HD * 2);
  AttentionArgs a = base;
  a.q = make_view(fused.data(), DType::kBFloat16, {B, S, 4, 64}, {S * W, W, 64, 1});
  a.o = make_view(fused.data() + HD, DType::kBFloat16, {B, S, 4, 64}, {S * W, W, 64, 1});
  ASSERT_TRUE(attention_forward(base, cpu_opts()).ok());
  const Status s = attention_forward(a, cpu_opts());
  ASSERT_TRUE(s.ok()) << s.message();
  for (int64_t r = 0; r < B * S; ++r)
    EXPECT_EQ(std::memcmp(&fused[r * W + HD], static_cast<const uint16_t*>(base.o.data) + r * HD,
                          HD * 2),
              0)
        << "row " << r;
}

TEST(Aliasing, MergeStatesOutputOnAPartIsRefused) {
  std::vector<float> parts(2 * 3 * 2 * 8, 0.25f), lse_parts(2 * 3 * 2, 0.5f), lse(3 * 2);
  MergeStatesArgs a;
  a.o_parts = make_view(parts.data(), DType::kFloat32, {2, 3, 2, 8});
  a.lse_parts = make_view(lse_parts.data(), DType::kFloat32, {2, 3, 2});
  a.o = make_view(parts.data(), DType::kFloat32, {3, 2, 8});  // part 0, merged in place
  a.lse = make_view(lse.data(), DType::kFloat32, {3, 2});
  expect_invalid(merge_states(a, cpu_opts()), "o shares memory with o_parts");
  std::vector<float> o(3 * 2 * 8);
  a.o = make_view(o.data(), DType::kFloat32, {3, 2, 8});
  a.lse = make_view(lse_parts.data() + 6, DType::kFloat32, {3, 2});  // part 1's LSE
  expect_invalid(merge_states(a, cpu_opts()), "lse shares memory with lse_parts");
}

// Gated DeltaNet decode, 2 sequences, 1 / 2 heads, K = V = 4; the pool has 3 slots.
struct GdnDecodeBuffers {
  std::vector<uint16_t> q = std::vector<uint16_t>(8, 0x3f80), k = q;
  std::vector<uint16_t> v = std::vector<uint16_t>(16, 0x3f80), o = std::vector<uint16_t>(16);
  std::vector<float> g = std::vector<float>(4, -0.1f), beta = std::vector<float>(4, 0.5f),
                     pool = std::vector<float>(3 * 2 * 16, 0.1f);
  std::vector<int32_t> slots = {2, 0};
  GdnDecodeArgs args() {
    GdnDecodeArgs a;
    a.q = make_view(q.data(), DType::kBFloat16, {2, 1, 4});
    a.k = make_view(k.data(), DType::kBFloat16, {2, 1, 4});
    a.v = make_view(v.data(), DType::kBFloat16, {2, 2, 4});
    a.o = make_view(o.data(), DType::kBFloat16, {2, 2, 4});
    a.g = make_view(g.data(), DType::kFloat32, {2, 2});
    a.beta = make_view(beta.data(), DType::kFloat32, {2, 2});
    a.state_pool = make_view(pool.data(), DType::kFloat32, {3, 2, 4, 4});
    a.state_indices = make_view(slots.data(), DType::kInt32, {2});
    return a;
  }
};

TEST(Aliasing, GdnDecodePoolApartFromEverything) {
  GdnDecodeBuffers b;
  ASSERT_TRUE(gdn_decode_step(b.args(), cpu_opts()).ok());
  GdnDecodeArgs a = b.args();
  a.state_pool.stride[0] = 0;  // three slots on one state: distinct slots would race
  expect_invalid(gdn_decode_step(a, cpu_opts()), "state_pool [3, 2, 4, 4] has elements that share");
  a = b.args();
  a.g = make_view(b.pool.data() + 40, DType::kFloat32, {2, 2});  // the gate inside the pool
  expect_invalid(gdn_decode_step(a, cpu_opts()), "state_pool shares memory with g");
  a = b.args();
  a.o = make_view(b.v.data(), DType::kBFloat16, {2, 2, 4});  // o over v
  expect_invalid(gdn_decode_step(a, cpu_opts()), "o shares memory with v");
}

// final_state = initial_state, the same view, is the allowed in-place update
// (GdnForwardState.FinalStateInPlace checks its result); any other overlap of the two is refused.
TEST(Aliasing, GdnFinalStateOnlyInPlace) {
  const int64_t T = 70, H = 1, HV = 2, K = 16, V = 16;
  std::vector<uint16_t> q(T * H * K, 0x3e00), k = q, v(T * HV * V, 0x3e80), o(T * HV * V);
  std::vector<float> g(T * HV, -0.05f), beta(T * HV, 0.5f), states(3 * HV * K * V, 0.01f);
  GdnChunkArgs a;
  a.q = make_view(q.data(), DType::kBFloat16, {1, T, H, K});
  a.k = make_view(k.data(), DType::kBFloat16, {1, T, H, K});
  a.v = make_view(v.data(), DType::kBFloat16, {1, T, HV, V});
  a.g = make_view(g.data(), DType::kFloat32, {1, T, HV});
  a.beta = make_view(beta.data(), DType::kFloat32, {1, T, HV});
  a.o = make_view(o.data(), DType::kBFloat16, {1, T, HV, V});
  a.initial_state = make_view(states.data(), DType::kFloat32, {1, HV, K, V});
  a.final_state = a.initial_state;
  const Status s = gdn_chunk_forward(a, cpu_opts());
  EXPECT_TRUE(s.ok()) << s.message();
  a.final_state = make_view(states.data() + V, DType::kFloat32, {1, HV, K, V});  // one row on
  expect_invalid(gdn_chunk_forward(a, cpu_opts()), "final_state shares memory with initial_state");
}

TEST(Aliasing, AppendKvCachesApartAndInterleavedPagesRun) {
  const int64_t T = 3, H = 2, D = 8, pages = 4, ps = 4;
  std::vector<uint16_t> k(T * H * D, 0x3f80), v(T * H * D, 0x4000);
  std::vector<int32_t> slots = {5, 0, 13};
  // One buffer of [pages, 2, ps, H, D]: K and V pages interleave (FlashInfer's layout).
  std::vector<uint16_t> cache(pages * 2 * ps * H * D, 0);
  const int64_t page = 2 * ps * H * D;
  AppendKvArgs a;
  a.k = make_view(k.data(), DType::kBFloat16, {T, H, D});
  a.v = make_view(v.data(), DType::kBFloat16, {T, H, D});
  a.slot_mapping = make_view(slots.data(), DType::kInt32, {T});
  a.k_cache = make_view(cache.data(), DType::kBFloat16, {pages, ps, H, D}, {page, H * D, D, 1});
  a.v_cache = make_view(cache.data() + ps * H * D, DType::kBFloat16, {pages, ps, H, D},
                        {page, H * D, D, 1});
  const Status s = append_kv_cache(a, cpu_opts());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cache[1 * page + 1 * H * D], 0x3f80);           // token 0's K: slot 5 = page 1, row 1
  EXPECT_EQ(cache[1 * page + ps * H * D + 1 * H * D], 0x4000);  // its V
  AppendKvArgs same = a;
  same.v_cache = same.k_cache;  // K and V written to the same memory
  expect_invalid(append_kv_cache(same, cpu_opts()), "v_cache shares memory with k_cache");
  std::vector<uint16_t> kc(pages * ps * H * D), vc(pages * ps * H * D, 0x4000);
  AppendKvArgs over = a;
  over.k_cache = make_view(kc.data(), DType::kBFloat16, {pages, ps, H, D});
  over.v_cache = make_view(vc.data(), DType::kBFloat16, {pages, ps, H, D});
  over.v = make_view(vc.data() + 8, DType::kBFloat16, {T, H, D});  // the new V inside v_cache
  expect_invalid(append_kv_cache(over, cpu_opts()), "v_cache shares memory with v");
}

}  // namespace
}  // namespace attnkit::test
