// Argument validation of the Gated DeltaNet ops: one test per error, each checking the status
// code, that the message names the argument, and that no output was written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "attnkit/gdn.h"
#include "attnkit/version.h"
#include "common/gdn_case.h"

namespace attnkit {
namespace {

using testkit::Buffer;

class GdnValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.dtype = DType::kBFloat16;
    c_.seqlens = {4, 6};
    c_.H = 1;
    c_.HV = 2;
    c_.K = c_.V = 16;
    c_.initial_state = true;
    d_ = test::make_gdn_data(c_);
    o_ = d_.make_o();
    fin_ = d_.make_state();
    o_.poison();
    fin_.poison();
    args_ = d_.args(o_, &fin_);
    ASSERT_TRUE(gdn_chunk_forward(args_).ok());  // the unmodified arguments are valid
    o_.poison();
    fin_.poison();
  }

  // The op fails with `code`, its message contains `what`, and o / final_state keep their poison.
  void expect_error(const Status& st, StatusCode code, const std::string& what) {
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos)
        << "message \"" << st.message() << "\" should mention \"" << what << "\"";
    EXPECT_EQ(test::count_nan(o_.to_float()), o_.numel()) << "o was written";
    EXPECT_EQ(test::count_nan(fin_.to_float()), fin_.numel()) << "final_state was written";
  }
  void expect_invalid(const GdnChunkArgs& a, const std::string& what) {
    expect_error(gdn_chunk_forward(a), StatusCode::kInvalidArgument, what);
    expect_error(gdn_recurrent_forward(a), StatusCode::kInvalidArgument, what);
  }
  Buffer ints(std::vector<int32_t> v) {
    Buffer b(DType::kInt32, {static_cast<int64_t>(v.size())});
    b.from_int(v);
    return b;
  }

  test::GdnCase c_;
  test::GdnData d_;
  Buffer o_, fin_;
  GdnChunkArgs args_;
};

TEST_F(GdnValidation, MissingQ) {
  GdnChunkArgs a = args_;
  a.q = TensorView{};
  expect_invalid(a, "q is required");
}

TEST_F(GdnValidation, KShapeDiffersFromQ) {
  Buffer k(c_.dtype, {1, 10, 1, 8});
  GdnChunkArgs a = args_;
  a.k = k.view();
  expect_invalid(a, "k has shape");
}

TEST_F(GdnValidation, VDtypeDiffersFromQ) {
  Buffer v(DType::kFloat16, {1, 10, 2, 16});
  GdnChunkArgs a = args_;
  a.v = v.view();
  expect_invalid(a, "v has dtype fp16");
}

TEST_F(GdnValidation, GateMustBeFp32) {
  Buffer g(DType::kBFloat16, {1, 10, 2});
  GdnChunkArgs a = args_;
  a.g = g.view();
  expect_invalid(a, "g has dtype bf16");
}

TEST_F(GdnValidation, BetaShape) {
  Buffer beta(DType::kFloat32, {1, 10, 1});
  GdnChunkArgs a = args_;
  a.beta = beta.view();
  expect_invalid(a, "beta has shape");
}

TEST_F(GdnValidation, BetaOfAnotherHalfType) {
  Buffer beta(DType::kFloat16, {1, 10, 2});
  GdnChunkArgs a = args_;
  a.beta = beta.view();
  expect_invalid(a, "beta has dtype");
}

TEST_F(GdnValidation, ValueHeadsNotAMultipleOfQkHeads) {
  Buffer q(c_.dtype, {1, 10, 2, 16}), k(c_.dtype, {1, 10, 2, 16}), v(c_.dtype, {1, 10, 3, 16});
  GdnChunkArgs a = args_;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  expect_invalid(a, "HV = 3 (v) must be a multiple of q/k heads H = 2");
}

TEST_F(GdnValidation, HeadSizeTooLarge) {
  Buffer q(c_.dtype, {1, 10, 1, 320}), k(c_.dtype, {1, 10, 1, 320});
  GdnChunkArgs a = args_;
  a.q = q.view();
  a.k = k.view();
  a.initial_state = a.final_state = TensorView{};
  expect_error(gdn_chunk_forward(a), StatusCode::kUnsupported, "head size K = 320");
}

TEST_F(GdnValidation, LastDimNotContiguous) {
  GdnChunkArgs a = args_;
  a.q = make_view(d_.q.data(), c_.dtype, {1, 5, 1, 16}, {160, 32, 16, 2});
  a.k = make_view(d_.k.data(), c_.dtype, {1, 5, 1, 16}, {160, 32, 16, 2});
  a.cu_seqlens = TensorView{};
  a.initial_state = a.final_state = TensorView{};
  Buffer v(c_.dtype, {1, 5, 2, 16}), g(DType::kFloat32, {1, 5, 2}), beta(DType::kFloat32, {1, 5, 2});
  Buffer o(c_.dtype, {1, 5, 2, 16});
  a.v = v.view();
  a.g = g.view();
  a.beta = beta.view();
  a.o = o.view();
  expect_invalid(a, "q must be contiguous in its last dimension");
}

TEST_F(GdnValidation, NegativeStride) {
  GdnChunkArgs a = args_;
  a.o.stride[1] = -a.o.stride[1];
  expect_invalid(a, "o has a negative stride");
}

TEST_F(GdnValidation, CuSeqlensNeedsBatchOfOne) {
  Buffer q(c_.dtype, {2, 5, 1, 16}), k(c_.dtype, {2, 5, 1, 16});
  GdnChunkArgs a = args_;
  a.q = q.view();
  a.k = k.view();
  expect_invalid(a, "cu_seqlens needs a ragged batch with B = 1, but q has B = 2");
}

TEST_F(GdnValidation, CuSeqlensDtype) {
  Buffer cu(DType::kFloat32, {3});
  GdnChunkArgs a = args_;
  a.cu_seqlens = cu.view();
  expect_invalid(a, "cu_seqlens has dtype fp32");
}

TEST_F(GdnValidation, CuSeqlensMustStartAtZero) {
  Buffer cu = ints({1, 4, 10});
  GdnChunkArgs a = args_;
  a.cu_seqlens = cu.view();
  expect_invalid(a, "cu_seqlens[0] must be 0");
}

TEST_F(GdnValidation, CuSeqlensDecreasing) {
  Buffer cu = ints({0, 6, 4});
  GdnChunkArgs a = args_;
  a.cu_seqlens = cu.view();
  expect_invalid(a, "cu_seqlens must be non-decreasing");
}

TEST_F(GdnValidation, CuSeqlensPastT) {
  Buffer cu = ints({0, 4, 11});
  GdnChunkArgs a = args_;
  a.cu_seqlens = cu.view();
  expect_invalid(a, "cu_seqlens ends at 11, past the 10 rows");
}

TEST_F(GdnValidation, InitialStateShape) {
  Buffer h0(DType::kFloat32, {3, 2, 16, 16});  // one state per sequence: N = 2
  GdnChunkArgs a = args_;
  a.initial_state = h0.view();
  expect_invalid(a, "initial_state has shape [3, 2, 16, 16], expected [2, 2, 16, 16]");
}

TEST_F(GdnValidation, InitialStateMustBeFp32) {
  Buffer h0(DType::kBFloat16, {2, 2, 16, 16});
  GdnChunkArgs a = args_;
  a.initial_state = h0.view();
  expect_invalid(a, "initial_state has dtype bf16");
}

TEST_F(GdnValidation, FinalStateShape) {
  Buffer fin(DType::kFloat32, {2, 2, 16, 8});
  GdnChunkArgs a = args_;
  a.final_state = fin.view();
  expect_invalid(a, "final_state has shape");
}

TEST_F(GdnValidation, OutputDtype) {
  Buffer o(DType::kFloat32, {1, 10, 2, 16});
  GdnChunkArgs a = args_;
  a.o = o.view();
  expect_invalid(a, "o has dtype fp32");
}

TEST_F(GdnValidation, ScaleMustBeFinite) {
  GdnChunkArgs a = args_;
  a.scale = NAN;
  expect_invalid(a, "scale must be finite");
}

TEST_F(GdnValidation, TensorsOnDifferentDevices) {
  GdnChunkArgs a = args_;
  a.v.device = cuda(0);  // never dereferenced: validation stops first
  expect_invalid(a, "v is on");
}

TEST_F(GdnValidation, CpuTensorsWithCudaBackendForced) {
  ExecOptions opts;
  opts.backend = Backend::kCudaSm90;
  expect_error(gdn_chunk_forward(args_, opts), StatusCode::kInvalidArgument, "cuda-sm90");
}

TEST_F(GdnValidation, CudaTensorsNeedACudaBuild) {
  // Views that claim a CUDA device; no cu_seqlens, so nothing on the device is read.
  GdnChunkArgs a = args_;
  a.cu_seqlens = TensorView{};
  a.initial_state = a.final_state = TensorView{};
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.g, &a.beta, &a.o}) t->device = cuda(0);
  expect_error(gdn_recurrent_forward(a), StatusCode::kUnsupported, "CPU reference only");
  // In a CUDA build the kernels serve these (tests/cuda covers them); the views above point to
  // host memory, so they must not be launched here.
  if (built_with_cuda()) GTEST_SKIP() << "CUDA build: the GPU suite tests CUDA dispatch";
  expect_error(gdn_chunk_forward(a), StatusCode::kUnsupported, "gdn_chunk_forward");
  Buffer g_cum(DType::kFloat32, {a.g.shape[0], a.g.shape[1], a.g.shape[2]});
  TensorView gc = g_cum.view();
  gc.device = cuda(0);
  GdnCumsumArgs cs{a.g, {}, gc};
  expect_error(gdn_chunk_cumsum(cs), StatusCode::kUnsupported, "gdn_chunk_cumsum");
}

// ---- stage ops

TEST_F(GdnValidation, StateInverseLastDimMustBe64) {
  Buffer g_cum(DType::kFloat32, {1, 10, 2}), a_inv(DType::kFloat32, {1, 10, 2, 32});
  a_inv.poison();
  const Status st = gdn_kkt_inverse(
      {d_.k.view(), d_.beta.view(), g_cum.view(), d_.cu.view(), a_inv.view()});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("a_inv has shape [1, 10, 2, 32], expected [1, 10, 2, 64]"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(test::count_nan(a_inv.to_float()), a_inv.numel());
}

TEST_F(GdnValidation, IntermediatesAreFp32OrBf16) {
  Buffer g_cum(DType::kFloat32, {1, 10, 2}), a_inv(DType::kFloat32, {1, 10, 2, 64});
  Buffer w(DType::kFloat16, {1, 10, 2, 16}), u(DType::kFloat32, {1, 10, 2, 16});
  const Status st = gdn_wu({d_.k.view(), d_.v.view(), d_.beta.view(), g_cum.view(), a_inv.view(),
                            d_.cu.view(), w.view(), u.view()});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("w has dtype fp16"), std::string::npos) << st.message();
}

TEST_F(GdnValidation, HMustHoldOneStatePerChunk) {
  // seqlens {4, 6}: two chunks.
  Buffer g_cum(DType::kFloat32, {1, 10, 2}), w(DType::kFloat32, {1, 10, 2, 16}),
      u(DType::kFloat32, {1, 10, 2, 16}), vn(DType::kFloat32, {1, 10, 2, 16}),
      h(DType::kFloat32, {1, 2, 16, 16});
  vn.poison();
  const Status st = gdn_state_pass({d_.k.view(), w.view(), u.view(), g_cum.view(), d_.cu.view(),
                                    {}, h.view(), vn.view(), {}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("h has shape [1, 2, 16, 16], expected [2, 2, 16, 16]"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(test::count_nan(vn.to_float()), vn.numel()) << "v_new was written";
  const Status st2 = gdn_chunk_output({d_.q.view(), d_.k.view(), vn.view(), h.view(),
                                       g_cum.view(), d_.cu.view(), o_.view(), 0.f});
  EXPECT_NE(st2.message().find("h has shape"), std::string::npos) << st2.message();
}

TEST_F(GdnValidation, NumChunks) {
  int64_t n = -1;
  ASSERT_TRUE(gdn_num_chunks(d_.q.view(), d_.cu.view(), &n).ok());
  EXPECT_EQ(n, 2);
  Buffer q(c_.dtype, {3, 129, 1, 16});
  ASSERT_TRUE(gdn_num_chunks(q.view(), {}, &n).ok());
  EXPECT_EQ(n, 9);
  Buffer q1(c_.dtype, {1, 200, 1, 16});
  Buffer cu = ints({0, 70, 70, 134, 139, 200});
  ASSERT_TRUE(gdn_num_chunks(q1.view(), cu.view(), &n).ok());
  EXPECT_EQ(n, 2 + 0 + 1 + 1 + 1);
  EXPECT_EQ(gdn_num_chunks(q1.view(), cu.view(), nullptr).code(), StatusCode::kInvalidArgument);
}

// ---- decode

class GdnDecodeValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(1);
    for (Buffer* b : {&q_, &k_, &v_, &g_, &beta_, &pool_}) testkit::fill_normal(*b, rng);
    ind_.from_int({2, 0});
    o_.poison();
    args_ = {q_.view(), k_.view(), v_.view(), g_.view(), beta_.view(), pool_.view(), ind_.view(),
             o_.view()};
    pool_copy_ = pool_.to(cpu());
  }
  void expect_invalid(const GdnDecodeArgs& a, const std::string& what) {
    const Status st = gdn_decode_step(a);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_EQ(test::count_nan(o_.to_float()), o_.numel()) << "o was written";
    EXPECT_EQ(std::memcmp(pool_.data(), pool_copy_.data(), pool_.bytes()), 0) << "pool changed";
  }

  Buffer q_{DType::kBFloat16, {2, 1, 16}}, k_{DType::kBFloat16, {2, 1, 16}},
      v_{DType::kBFloat16, {2, 2, 16}}, g_{DType::kFloat32, {2, 2}}, beta_{DType::kFloat32, {2, 2}},
      pool_{DType::kFloat32, {3, 2, 16, 16}}, ind_{DType::kInt32, {2}},
      o_{DType::kBFloat16, {2, 2, 16}};
  Buffer pool_copy_;
  GdnDecodeArgs args_;
};

TEST_F(GdnDecodeValidation, ValidArgumentsRun) {
  ASSERT_TRUE(gdn_decode_step(args_).ok());
  EXPECT_EQ(test::count_nan(o_.to_float()), 0);
}

TEST_F(GdnDecodeValidation, IndexOutOfRange) {
  Buffer ind(DType::kInt32, {2});
  ind.from_int({2, 3});
  GdnDecodeArgs a = args_;
  a.state_indices = ind.view();
  expect_invalid(a, "state_indices[1] = 3 is outside [0, 3)");
}

TEST_F(GdnDecodeValidation, NegativeIndexOtherThanPadding) {
  Buffer ind(DType::kInt32, {2});
  ind.from_int({-2, 0});
  GdnDecodeArgs a = args_;
  a.state_indices = ind.view();
  expect_invalid(a, "state_indices[0] = -2 is outside [0, 3) (state_pool slots) and is not -1");
}

// -1 marks padding rows, any number of them: output 0, no slot read or written; the other rows
// run as they would alone.
TEST_F(GdnDecodeValidation, PaddingRowsAreSkipped) {
  Buffer ind(DType::kInt32, {2});
  ind.from_int({-1, 0});
  GdnDecodeArgs a = args_;
  a.state_indices = ind.view();
  ASSERT_TRUE(gdn_decode_step(a).ok());
  const std::vector<float> o = o_.to_float();
  for (int i = 0; i < 2 * 16; ++i) ASSERT_EQ(o[i], 0.f) << "padding row, element " << i;
  const size_t slot_bytes = pool_.bytes() / 3;
  EXPECT_NE(std::memcmp(pool_.data(), pool_copy_.data(), slot_bytes), 0) << "slot 0 updated";
  EXPECT_EQ(std::memcmp(static_cast<const char*>(pool_.data()) + slot_bytes,
                        static_cast<const char*>(pool_copy_.data()) + slot_bytes, 2 * slot_bytes),
            0)
      << "slots 1 and 2 untouched";
  // Row 1 alone (row 0 on slot 2 instead) from the same pool gives the same output row.
  std::memcpy(pool_.data(), pool_copy_.data(), pool_.bytes());
  o_.poison();
  ASSERT_TRUE(gdn_decode_step(args_).ok());  // slots {2, 0}
  const std::vector<float> o2 = o_.to_float();
  for (int i = 2 * 16; i < 4 * 16; ++i) ASSERT_EQ(o2[i], o[i]) << "row 1, element " << i;
  ind.from_int({-1, -1});
  o_.poison();
  ASSERT_TRUE(gdn_decode_step(a).ok());
  for (float x : o_.to_float()) ASSERT_EQ(x, 0.f);
}

// Fused gating (gdn.h): the gates from A_log, a, dt_bias and b give what g and beta computed from
// the same formula in double give, to fp32 rounding; a + dt_bias above 20 takes softplus(x) = x.
TEST_F(GdnDecodeValidation, FusedGatingMatchesExplicitGates) {
  Buffer a_log(DType::kFloat32, {2}), dt_bias(DType::kFloat32, {2}), ga(DType::kBFloat16, {2, 2}),
      gb(DType::kBFloat16, {2, 2}), g(DType::kFloat32, {2, 2}), beta(DType::kFloat32, {2, 2});
  a_log.from_float({-0.7f, 0.4f});
  dt_bias.from_float({0.3f, -1.1f});
  ga.from_float({-2.5f, 0.8f, 21.0f, 1.9f});  // 21 + 0.3 > 20: the linear branch
  gb.from_float({-1.5f, 0.25f, 2.0f, -0.5f});
  std::vector<float> gv(4), bv(4);
  const std::vector<float> al = a_log.to_float(), db = dt_bias.to_float(), av = ga.to_float(),
                           bb = gb.to_float();
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 2; ++h) {
      const double x = double{av[n * 2 + h]} + db[h];
      const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
      gv[n * 2 + h] = static_cast<float>(-std::exp(double{al[h]}) * sp);
      bv[n * 2 + h] = static_cast<float>(1.0 / (1.0 + std::exp(-double{bb[n * 2 + h]})));
    }
  g.from_float(gv);
  beta.from_float(bv);
  GdnDecodeArgs e = args_;
  e.g = g.view();
  e.beta = beta.view();
  ASSERT_TRUE(gdn_decode_step(e).ok());
  const std::vector<float> o_explicit = o_.to_float(), pool_explicit = pool_.to_float();

  std::memcpy(pool_.data(), pool_copy_.data(), pool_.bytes());
  o_.poison();
  GdnDecodeArgs f = args_;
  f.g = f.beta = {};
  f.A_log = a_log.view();
  f.dt_bias = dt_bias.view();
  f.a = ga.view();
  f.b = gb.view();
  const Status st = gdn_decode_step(f);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> o_fused = o_.to_float(), pool_fused = pool_.to_float();
  for (size_t i = 0; i < o_fused.size(); ++i)
    ASSERT_NEAR(o_fused[i], o_explicit[i], 1e-2f * (1.f + std::fabs(o_explicit[i]))) << i;
  for (size_t i = 0; i < pool_fused.size(); ++i)
    ASSERT_NEAR(pool_fused[i], pool_explicit[i], 1e-5f * (1.f + std::fabs(pool_explicit[i]))) << i;

  // Both forms at once, or a missing parameter, are refused.
  std::memcpy(pool_.data(), pool_copy_.data(), pool_.bytes());
  o_.poison();
  GdnDecodeArgs both = f;
  both.g = g.view();
  expect_invalid(both, "not both");
  GdnDecodeArgs missing = f;
  missing.dt_bias = {};
  expect_invalid(missing, "dt_bias");
  Buffer b32(DType::kFloat32, {2, 2});  // a and b share a dtype
  b32.from_float(bb);
  GdnDecodeArgs mixed = f;
  mixed.b = b32.view();
  expect_invalid(mixed, "b has dtype fp32, expected bf16");
}

TEST_F(GdnDecodeValidation, RepeatedIndex) {
  Buffer ind(DType::kInt32, {2});
  ind.from_int({1, 1});
  GdnDecodeArgs a = args_;
  a.state_indices = ind.view();
  expect_invalid(a, "state_indices[1] = 1 repeats state_indices[0]");
}

TEST_F(GdnDecodeValidation, IndicesLength) {
  Buffer ind(DType::kInt32, {3});
  ind.from_int({0, 1, 2});
  GdnDecodeArgs a = args_;
  a.state_indices = ind.view();
  expect_invalid(a, "state_indices has shape [3], expected [2]");
}

TEST_F(GdnDecodeValidation, PoolMustBeFp32) {
  Buffer pool(DType::kBFloat16, {3, 2, 16, 16});
  GdnDecodeArgs a = args_;
  a.state_pool = pool.view();
  expect_invalid(a, "state_pool has dtype bf16");
}

TEST_F(GdnDecodeValidation, PoolShape) {
  Buffer pool(DType::kFloat32, {3, 1, 16, 16});
  GdnDecodeArgs a = args_;
  a.state_pool = pool.view();
  expect_invalid(a, "state_pool has shape [3, 1, 16, 16], expected [*, 2, 16, 16]");
}

TEST_F(GdnDecodeValidation, MissingIndices) {
  GdnDecodeArgs a = args_;
  a.state_indices = TensorView{};
  expect_invalid(a, "state_indices is required");
}

TEST_F(GdnDecodeValidation, GroupedHeads) {
  Buffer v(DType::kBFloat16, {2, 3, 16});
  Buffer q(DType::kBFloat16, {2, 2, 16}), k(DType::kBFloat16, {2, 2, 16});
  GdnDecodeArgs a = args_;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  expect_invalid(a, "must be a multiple of q/k heads");
}

}  // namespace
}  // namespace attnkit
