// Gated DeltaNet states in the key-last layout of vLLM, SGLang and FlashInfer ([.., HV, V, K],
// passed to attnkit as the transposed [.., HV, K, V] view): the decode step's pool and the chunked
// forward's initial / final states give bit for bit what the V-contiguous layout gives, and a
// state contiguous in neither K nor V is refused, naming the argument.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "attnkit/gdn.h"
#include "common/gdn_case.h"
#include "testkit/buffer.h"

namespace attnkit {
namespace {

using testkit::Buffer;

constexpr int64_t kK = 32, kV = 48;

// [rows, HV, K, V] values <-> the same values laid out [rows, HV, V, K].
std::vector<float> transpose_last2(const std::vector<float>& x, int64_t outer, int64_t a, int64_t b) {
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) y[(o * b + j) * a + i] = x[(o * a + i) * b + j];
  return y;
}

// The [rows, HV, K, V] view of a buffer that holds [rows, HV, V, K].
TensorView key_last_view(const Buffer& b, int64_t rows, int64_t hv) {
  return make_view(b.data(), DType::kFloat32, {rows, hv, kK, kV}, {hv * kK * kV, kK * kV, 1, kK});
}

Buffer random(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, float lo, float hi) {
  Buffer b(dt, std::move(shape));
  testkit::fill_uniform(b, rng, lo, hi);
  return b;
}

TEST(GdnKeyLast, DecodePoolMatchesValueContiguousPool) {
  std::mt19937_64 rng(7);
  const int64_t N = 3, H = 1, HV = 2, P = 5;
  Buffer q = random(DType::kFloat32, {N, H, kK}, rng, -0.3f, 0.3f);
  Buffer k = random(DType::kFloat32, {N, H, kK}, rng, -0.3f, 0.3f);
  Buffer v = random(DType::kFloat32, {N, HV, kV}, rng, -1.f, 1.f);
  Buffer g = random(DType::kFloat32, {N, HV}, rng, -1.f, 0.f);
  Buffer beta = random(DType::kFloat32, {N, HV}, rng, 0.1f, 1.f);
  Buffer pool = random(DType::kFloat32, {P, HV, kK, kV}, rng, -0.5f, 0.5f);
  Buffer pool_kl(DType::kFloat32, {P, HV, kV, kK});
  pool_kl.from_float(transpose_last2(pool.to_float(), P * HV, kK, kV));
  Buffer idx(DType::kInt32, {N});
  idx.from_int({4, 0, 2});
  Buffer o(DType::kFloat32, {N, HV, kV}), o_kl(DType::kFloat32, {N, HV, kV});

  GdnDecodeArgs a{q.view(), k.view(), v.view(), g.view(), beta.view(), pool.view(), idx.view(),
                  o.view()};
  a.use_qk_l2norm = true;
  ASSERT_TRUE(gdn_decode_step(a).ok());
  a.state_pool = key_last_view(pool_kl, P, HV);
  a.o = o_kl.view();
  const Status st = gdn_decode_step(a);
  ASSERT_TRUE(st.ok()) << st.message();

  EXPECT_EQ(o.to_float(), o_kl.to_float());
  EXPECT_EQ(transpose_last2(pool.to_float(), P * HV, kK, kV), pool_kl.to_float());
}

TEST(GdnKeyLast, ChunkForwardStatesMatchValueContiguousStates) {
  test::GdnCase c;
  c.dtype = DType::kFloat32;
  c.seqlens = {70, 80};
  c.H = 2;
  c.HV = 4;
  c.K = kK;
  c.V = kV;
  c.initial_state = true;
  c.seed = 8;
  const test::GdnData d = test::make_gdn_data(c);
  const int64_t N = c.num_seqs(), HV = c.HV;
  Buffer h0_kl(DType::kFloat32, {N, HV, kV, kK});
  h0_kl.from_float(transpose_last2(d.h0.to_float(), N * HV, kK, kV));
  Buffer o = d.make_o(), o_kl = d.make_o(), fin = d.make_state();
  Buffer fin_kl(DType::kFloat32, {N, HV, kV, kK});

  ASSERT_TRUE(gdn_chunk_forward(d.args(o, &fin)).ok());
  GdnChunkArgs a = d.args(o_kl);
  a.initial_state = key_last_view(h0_kl, N, HV);
  a.final_state = key_last_view(fin_kl, N, HV);
  const Status st = gdn_chunk_forward(a);
  ASSERT_TRUE(st.ok()) << st.message();

  EXPECT_EQ(o.to_float(), o_kl.to_float());
  EXPECT_EQ(transpose_last2(fin.to_float(), N * HV, kK, kV), fin_kl.to_float());
}

TEST(GdnKeyLast, StateContiguousInNeitherKNorVIsRefused) {
  std::mt19937_64 rng(9);
  const int64_t N = 1, H = 1, HV = 1, P = 2;
  Buffer q = random(DType::kFloat32, {N, H, kK}, rng, -0.3f, 0.3f);
  Buffer k = random(DType::kFloat32, {N, H, kK}, rng, -0.3f, 0.3f);
  Buffer v = random(DType::kFloat32, {N, HV, kV}, rng, -1.f, 1.f);
  Buffer g = random(DType::kFloat32, {N, HV}, rng, -1.f, 0.f);
  Buffer beta = random(DType::kFloat32, {N, HV}, rng, 0.1f, 1.f);
  Buffer pool(DType::kFloat32, {P, HV, kK, 2 * kV});
  Buffer idx(DType::kInt32, {N});
  idx.from_int({1});
  Buffer o(DType::kFloat32, {N, HV, kV});
  GdnDecodeArgs a{q.view(), k.view(), v.view(), g.view(), beta.view(),
                  make_view(pool.data(), DType::kFloat32, {P, HV, kK, kV},
                            {HV * kK * 2 * kV, kK * 2 * kV, 2 * kV, 2}),
                  idx.view(), o.view()};
  const Status st = gdn_decode_step(a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("state_pool"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace attnkit
