// Gated DeltaNet decode step on the GPU vs the CPU reference: a pool with scattered slots (untouched
// slots stay bit-identical), grouped value heads, bf16/fp16/fp32 tokens, q/k/v rows with a stride
// that is not a multiple of 16 bytes, L2 norm, and device-side indices that are out of range (those
// sequences are skipped and get a zero output row).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "cuda/gdn_cuda_util.h"

namespace attnkit::gdn_test {
namespace {

constexpr int64_t kD = 128;

struct DecodeCase {
  int64_t N, H, HV, P;
  DType dt;
  DType beta_dt;
  bool l2norm;
};

struct DecodeInputs {
  Buffer q, k, v, g, beta, pool, idx;
};

DecodeInputs make_inputs(const DecodeCase& c, const std::vector<int32_t>& slots, std::mt19937_64& rng) {
  DecodeInputs in;
  in.q = Buffer(c.dt, {c.N, c.H, kD});
  in.k = Buffer(c.dt, {c.N, c.H, kD});
  testkit::fill_normal(in.q, rng, 0.f, c.l2norm ? 1.f : 0.09f);
  testkit::fill_normal(in.k, rng, 0.f, c.l2norm ? 1.f : 0.09f);
  in.v = Buffer(c.dt, {c.N, c.HV, kD});
  testkit::fill_normal(in.v, rng);
  in.g = random_gates({c.N, c.HV}, rng, -1.f, 0.f);
  in.beta = Buffer(c.beta_dt, {c.N, c.HV});
  testkit::fill_uniform(in.beta, rng, 0.05f, 1.f);
  in.pool = Buffer(DType::kFloat32, {c.P, c.HV, kD, kD});
  testkit::fill_normal(in.pool, rng, 0.f, 0.5f);
  in.idx = Buffer(DType::kInt32, {c.N});
  in.idx.from_int(slots);
  return in;
}

GdnDecodeArgs args_of(const DecodeInputs& in, const Buffer& pool, const Buffer& idx, const Buffer& o,
                      bool l2norm) {
  GdnDecodeArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  a.g = in.g.view();
  a.beta = in.beta.view();
  a.state_pool = pool.view();
  a.state_indices = idx.view();
  a.o = o.view();
  a.use_qk_l2norm = l2norm;
  return a;
}

void run_case(const DecodeCase& c, const std::vector<int32_t>& slots, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DecodeInputs h = make_inputs(c, slots, rng);
  const std::vector<float> pool0 = h.pool.to_float();

  // CPU reference on host copies.
  Buffer ref_pool = h.pool.to(cpu());
  Buffer ref_o(c.dt, {c.N, c.HV, kD});
  ExecOptions cpu_opts;
  cpu_opts.backend = Backend::kCPU;
  ASSERT_TRUE(gdn_decode_step(args_of(h, ref_pool, h.idx, ref_o, c.l2norm), cpu_opts).ok());

  DecodeInputs d{dev(h.q), dev(h.k), dev(h.v), dev(h.g), dev(h.beta), dev(h.pool), dev(h.idx)};
  Buffer o = poisoned(c.dt, {c.N, c.HV, kD});
  const Status st = gdn_decode_step(args_of(d, d.pool, d.idx, o, c.l2norm));
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();
  expect_close(o, ref_o, "o");
  expect_close(d.pool, ref_pool, "state pool");
  // Slots no sequence uses are untouched, bit for bit.
  const std::vector<float> pool1 = d.pool.to_float();
  const int64_t per = c.HV * kD * kD;
  for (int64_t s = 0; s < c.P; ++s) {
    if (std::find(slots.begin(), slots.end(), s) != slots.end()) continue;
    EXPECT_EQ(0, std::memcmp(&pool0[s * per], &pool1[s * per], per * sizeof(float))) << "slot " << s;
  }
}

TEST(GdnDecodeCuda, ScatteredSlotsBf16) {
  run_case({5, 2, 4, 9, DType::kBFloat16, DType::kBFloat16, false}, {7, 2, 5, 0, 8}, 11);
}
TEST(GdnDecodeCuda, L2NormFp32Beta) {
  run_case({3, 1, 4, 4, DType::kBFloat16, DType::kFloat32, true}, {3, 0, 1}, 12);
}
TEST(GdnDecodeCuda, Fp16GroupedHeads) {
  run_case({4, 2, 8, 6, DType::kFloat16, DType::kFloat16, true}, {1, 4, 2, 5}, 13);
}
TEST(GdnDecodeCuda, Batch32) {
  std::vector<int32_t> slots(32);
  for (int i = 0; i < 32; ++i) slots[i] = (i * 7) % 40;
  run_case({32, 4, 8, 40, DType::kBFloat16, DType::kFloat32, true}, slots, 14);
}

// Many more work items than the persistent grid has CTAs (256 x 8 heads x 2 column slices over a
// few hundred CTAs), so each CTA walks a dozen items and the kernel's slot prefetch (the pool slot
// of the item after next is loaded while the current one is processed) is exercised.
TEST(GdnDecodeCuda, ManyItemsPerCta) {
  std::vector<int32_t> slots(256);
  for (int i = 0; i < 256; ++i) slots[i] = (i * 37) % 260;  // distinct: 37 and 260 are coprime
  run_case({256, 2, 8, 260, DType::kBFloat16, DType::kBFloat16, false}, slots, 15);
}

TEST(GdnDecodeCuda, Fp32Tokens) {
  run_case({3, 1, 2, 4, DType::kFloat32, DType::kFloat32, true}, {2, 0, 3}, 16);
}

// q, k and v rows 130 elements apart (views into wider buffers, not 16-byte aligned). Same values
// as a contiguous CPU run.
TEST(GdnDecodeCuda, StridedRows) {
  const DecodeCase c{6, 2, 4, 8, DType::kBFloat16, DType::kFloat32, true};
  const std::vector<int32_t> slots = {3, 7, 0, 5, 1, 6};
  std::mt19937_64 rng(17);
  DecodeInputs h = make_inputs(c, slots, rng);
  Buffer ref_pool = h.pool.to(cpu());
  Buffer ref_o(c.dt, {c.N, c.HV, kD});
  ExecOptions cpu_opts;
  cpu_opts.backend = Backend::kCPU;
  ASSERT_TRUE(gdn_decode_step(args_of(h, ref_pool, h.idx, ref_o, c.l2norm), cpu_opts).ok());

  constexpr int64_t kWide = 130;
  auto widen = [&](const Buffer& b, int64_t heads) {
    const std::vector<float> x = b.to_float();
    std::vector<float> y(static_cast<size_t>(c.N * heads * kWide), 0.f);
    for (int64_t r = 0; r < c.N * heads; ++r)
      for (int64_t i = 0; i < kD; ++i) y[r * kWide + i] = x[r * kD + i];
    Buffer w(c.dt, {c.N, heads, kWide});
    w.from_float(y);
    return dev(w);
  };
  auto narrow = [&](const Buffer& w, int64_t heads) {
    return make_view(w.data(), c.dt, {c.N, heads, kD}, {heads * kWide, kWide, 1}, w.device());
  };
  const Buffer qw = widen(h.q, c.H), kw = widen(h.k, c.H), vw = widen(h.v, c.HV);
  const Buffer g = dev(h.g), beta = dev(h.beta), idx = dev(h.idx);
  Buffer pool = dev(h.pool);
  Buffer o = poisoned(c.dt, {c.N, c.HV, kD});
  GdnDecodeArgs a;
  a.q = narrow(qw, c.H);
  a.k = narrow(kw, c.H);
  a.v = narrow(vw, c.HV);
  a.g = g.view();
  a.beta = beta.view();
  a.state_pool = pool.view();
  a.state_indices = idx.view();
  a.o = o.view();
  a.use_qk_l2norm = c.l2norm;
  const Status st = gdn_decode_step(a);
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();
  expect_close(o, ref_o, "o");
  expect_close(pool, ref_pool, "state pool");
}

// Device indices that nobody validated: -1 and P + 3 are skipped (pool untouched, o row zero);
// the others match a CPU run over the valid sequences alone.
TEST(GdnDecodeCuda, OutOfRangeDeviceIndexSkipsSequence) {
  const DecodeCase c{4, 1, 2, 5, DType::kBFloat16, DType::kFloat32, false};
  const std::vector<int32_t> slots = {3, -1, 1, 8};
  std::mt19937_64 rng(21);
  DecodeInputs h = make_inputs(c, slots, rng);
  const std::vector<float> pool0 = h.pool.to_float();

  DecodeInputs d{dev(h.q), dev(h.k), dev(h.v), dev(h.g), dev(h.beta), dev(h.pool), dev(h.idx)};
  Buffer o = poisoned(c.dt, {c.N, c.HV, kD});
  ASSERT_TRUE(gdn_decode_step(args_of(d, d.pool, d.idx, o, false)).ok());
  testkit::cuda_synchronize();

  // Reference: sequences 0 and 2 through the CPU with their own slots.
  const std::vector<float> q = h.q.to_float(), k = h.k.to_float(), v = h.v.to_float(),
                           g = h.g.to_float(), beta = h.beta.to_float();
  Buffer ref_pool = h.pool.to(cpu());
  for (int n : {0, 2}) {
    DecodeCase one = c;
    one.N = 1;
    DecodeInputs s;
    auto slice = [&](const std::vector<float>& src, DType dt, std::vector<int64_t> shape, int64_t per) {
      Buffer b(dt, shape);
      b.from_float(std::vector<float>(src.begin() + n * per, src.begin() + (n + 1) * per));
      return b;
    };
    s.q = slice(q, c.dt, {1, c.H, kD}, c.H * kD);
    s.k = slice(k, c.dt, {1, c.H, kD}, c.H * kD);
    s.v = slice(v, c.dt, {1, c.HV, kD}, c.HV * kD);
    s.g = slice(g, DType::kFloat32, {1, c.HV}, c.HV);
    s.beta = slice(beta, c.beta_dt, {1, c.HV}, c.HV);
    s.idx = Buffer(DType::kInt32, {1});
    s.idx.from_int({slots[n]});
    Buffer ro(c.dt, {1, c.HV, kD});
    ExecOptions co;
    co.backend = Backend::kCPU;
    ASSERT_TRUE(gdn_decode_step(args_of(s, ref_pool, s.idx, ro, false), co).ok());
    const std::vector<float> og = o.to_float(), orf = ro.to_float();
    const std::vector<float> og_n(og.begin() + n * c.HV * kD, og.begin() + (n + 1) * c.HV * kD);
    const auto e = testkit::compare(og_n, orf);
    EXPECT_TRUE(testkit::within(e, testkit::kGdn)) << "sequence " << n << ": " << e.str();
  }
  expect_close(d.pool, ref_pool, "state pool");
  const std::vector<float> og = o.to_float();
  for (int n : {1, 3})
    for (int64_t i = 0; i < c.HV * kD; ++i) ASSERT_EQ(og[n * c.HV * kD + i], 0.f) << "sequence " << n;
  const std::vector<float> pool1 = d.pool.to_float();
  const int64_t per = c.HV * kD * kD;
  for (int64_t s : {0, 2, 4})
    EXPECT_EQ(0, std::memcmp(&pool0[s * per], &pool1[s * per], per * sizeof(float))) << "slot " << s;
}

}  // namespace
}  // namespace attnkit::gdn_test
