// Gated DeltaNet decode step on the GPU vs the CPU reference: a pool with scattered slots (untouched
// slots stay bit-identical), grouped value heads, bf16/fp16/fp32 tokens, q/k/v rows with a stride
// that is not a multiple of 16 bytes, pool rows padded past V (the padding stays bit-identical), L2
// norm, fused gating, and device-side indices that are out of range (those sequences are skipped and get a zero
// output row). Every case runs on both kernels and on the default choice: the TMA ring of Hopper
// (GdnKernels::decode_ring: at any batch; by default only from one state per SM), and the
// register kernel that other GPUs run (GdnKernels::mma_sync).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/gdn_cuda_util.h"

namespace attnkit::gdn_test {
namespace {

constexpr int64_t kD = 128;

GdnKernels ring_kernels() {
  GdnKernels k;
  k.decode_ring = true;
  return k;
}
const NamedKernels kKernels[] = {{"default kernel", {}},
                                 {"the TMA ring at any batch", ring_kernels()},
                                 {"the register kernel of other GPUs", mma_sync_kernels()}};

// Runs fn(kernels) with kernel choice `k` of kKernels.
template <class Fn>
void with_kernel(const NamedKernels& k, Fn&& fn) {
  SCOPED_TRACE(k.name);
  fn(k.kernels);
}

struct DecodeCase {
  int64_t N, H, HV, P;
  DType dt;
  DType beta_dt;
  bool l2norm;
  int64_t pad = 0;  // pool rows are V + pad floats apart (K + pad when key_last)
  bool key_last = false;  // the pool is [P, HV, V, K], passed as its transposed [P, HV, K, V] view
  bool fused = false;     // gates from A_log, a, dt_bias, b (a, b in beta_dt) instead of g, beta
  int64_t row() const { return kD + pad; }
  int64_t per_slot() const { return HV * kD * row(); }
};

struct DecodeInputs {
  Buffer q, k, v, g, beta, pool, idx;
  Buffer A_log, a, dt_bias, b;  // fused gating only

  // A device copy; the pool is left out (empty) unless with_pool.
  DecodeInputs on_device(bool with_pool = true) const {
    auto d = [](const Buffer& x) { return x.data() ? dev(x) : Buffer(); };
    return {d(q), d(k), d(v), d(g), d(beta), with_pool ? d(pool) : Buffer(), d(idx),
            d(A_log), d(a), d(dt_bias), d(b)};
  }
};

DecodeInputs make_inputs(const DecodeCase& c, const std::vector<int32_t>& slots, std::mt19937_64& rng) {
  DecodeInputs in;
  in.q = Buffer(c.dt, {c.N, c.H, kD});
  in.k = Buffer(c.dt, {c.N, c.H, kD});
  testkit::fill_normal(in.q, rng, 0.f, c.l2norm ? 1.f : 0.09f);
  testkit::fill_normal(in.k, rng, 0.f, c.l2norm ? 1.f : 0.09f);
  in.v = Buffer(c.dt, {c.N, c.HV, kD});
  testkit::fill_normal(in.v, rng);
  if (c.fused) {  // a + dt_bias on both sides of softplus's switch at 20
    in.A_log = Buffer(DType::kFloat32, {c.HV});
    testkit::fill_uniform(in.A_log, rng, -3.f, 1.f);
    in.dt_bias = Buffer(DType::kFloat32, {c.HV});
    testkit::fill_normal(in.dt_bias, rng);
    in.a = Buffer(c.beta_dt, {c.N, c.HV});
    testkit::fill_normal(in.a, rng, 0.f, 2.f);
    std::vector<float> a = in.a.to_float();
    for (size_t i = 0; i < a.size(); i += 5) a[i] = 21.f + static_cast<float>(i % 3);
    in.a.from_float(a);
    in.b = Buffer(c.beta_dt, {c.N, c.HV});
    testkit::fill_normal(in.b, rng, 0.f, 2.f);
  } else {
    in.g = random_gates({c.N, c.HV}, rng, -1.f, 0.f);
    in.beta = Buffer(c.beta_dt, {c.N, c.HV});
    testkit::fill_uniform(in.beta, rng, 0.05f, 1.f);
  }
  in.pool = Buffer(DType::kFloat32, {c.P, c.HV, kD, c.row()});
  testkit::fill_normal(in.pool, rng, 0.f, 0.5f);
  in.idx = Buffer(DType::kInt32, {c.N});
  in.idx.from_int(slots);
  return in;
}

// The [P, HV, K, V] pool inside a buffer whose rows may be padded (its transposed view when the
// buffer holds the key-last [P, HV, V, K] layout).
TensorView pool_view(const Buffer& pool, const DecodeCase& c) {
  if (c.key_last)
    return make_view(pool.data(), DType::kFloat32, {c.P, c.HV, kD, kD},
                     {c.per_slot(), kD * c.row(), 1, c.row()}, pool.device());
  return make_view(pool.data(), DType::kFloat32, {c.P, c.HV, kD, kD}, {c.per_slot(), kD * c.row(), c.row(), 1},
                   pool.device());
}

GdnDecodeArgs args_of(const DecodeInputs& in, const DecodeCase& c, const Buffer& pool, const Buffer& idx,
                      const Buffer& o) {
  GdnDecodeArgs a;
  a.q = in.q.view();
  a.k = in.k.view();
  a.v = in.v.view();
  auto view = [](const Buffer& x) { return x.data() ? x.view() : TensorView{}; };
  a.g = view(in.g);
  a.beta = view(in.beta);
  a.A_log = view(in.A_log);
  a.a = view(in.a);
  a.dt_bias = view(in.dt_bias);
  a.b = view(in.b);
  a.state_pool = pool_view(pool, c);
  a.state_indices = idx.view();
  a.o = o.view();
  a.use_qk_l2norm = c.l2norm;
  return a;
}

// Slots no valid sequence uses, and the padding of every row, are as they were, bit for bit.
void expect_untouched(const DecodeCase& c, const std::vector<int32_t>& slots, const std::vector<float>& before,
                      const std::vector<float>& after) {
  int64_t changed = 0;
  for (int64_t s = 0; s < c.P; ++s) {
    const bool used = std::find(slots.begin(), slots.end(), s) != slots.end();
    for (int64_t i = 0; i < c.per_slot(); ++i) {
      const size_t at = static_cast<size_t>(s * c.per_slot() + i);
      if ((!used || i % c.row() >= kD) && std::memcmp(&before[at], &after[at], sizeof(float)) != 0) ++changed;
    }
  }
  EXPECT_EQ(changed, 0) << "pool elements outside the used slots' states changed";
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
  ASSERT_TRUE(gdn_decode_step(args_of(h, c, ref_pool, h.idx, ref_o), cpu_opts).ok());

  for (const auto& kernel : kKernels) {
    with_kernel(kernel, [&](const GdnKernels& kernels) {
      DecodeInputs d = h.on_device();
      Buffer o = poisoned(c.dt, {c.N, c.HV, kD});
      const Status st = decode_step_with(args_of(d, c, d.pool, d.idx, o), kernels);
      ASSERT_TRUE(st.ok()) << st.message();
      testkit::cuda_synchronize();
      expect_close(o, ref_o, "o");
      expect_close(d.pool, ref_pool, "state pool");
      expect_untouched(c, slots, pool0, d.pool.to_float());
    });
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

// Many more work items than the persistent grid has CTAs (256 sequences x 8 heads, in column slices,
// over one or two CTAs per SM), so each CTA walks a dozen items or more: the register kernel's
// slot prefetch and the ring's stages and token register sets wrap around several times.
TEST(GdnDecodeCuda, ManyItemsPerCta) {
  std::vector<int32_t> slots(256);
  for (int i = 0; i < 256; ++i) slots[i] = (i * 37) % 260;  // distinct: 37 and 260 are coprime
  run_case({256, 2, 8, 260, DType::kBFloat16, DType::kBFloat16, false}, slots, 15);
}

// Pool rows 136 floats apart: the ring copies each row on its own (rows are not one contiguous
// run), and the 8 padding floats of every row stay untouched.
TEST(GdnDecodeCuda, PaddedPoolRows) {
  std::vector<int32_t> slots(40);
  for (int i = 0; i < 40; ++i) slots[i] = (i * 13) % 43;
  DecodeCase c{40, 2, 4, 43, DType::kBFloat16, DType::kBFloat16, true};
  c.pad = 8;
  run_case(c, slots, 18);
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
  ASSERT_TRUE(gdn_decode_step(args_of(h, c, ref_pool, h.idx, ref_o), cpu_opts).ok());

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
  const DecodeInputs d = h.on_device(false);
  for (const auto& kernel : kKernels) {
    with_kernel(kernel, [&](const GdnKernels& kernels) {
      Buffer pool = dev(h.pool);
      Buffer o = poisoned(c.dt, {c.N, c.HV, kD});
      GdnDecodeArgs a = args_of(d, c, pool, d.idx, o);
      a.q = narrow(qw, c.H);
      a.k = narrow(kw, c.H);
      a.v = narrow(vw, c.HV);
      const Status st = decode_step_with(a, kernels);
      ASSERT_TRUE(st.ok()) << st.message();
      testkit::cuda_synchronize();
      expect_close(o, ref_o, "o");
      expect_close(pool, ref_pool, "state pool");
    });
  }
}

// Device indices that nobody validated: sequences whose slot is out of range (negative, or P and
// beyond) are skipped (their states untouched, their output rows zero); the others match one CPU
// run over the valid sequences alone.
void run_skipping_case(const DecodeCase& c, const std::vector<int32_t>& slots, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DecodeInputs h = make_inputs(c, slots, rng);
  const std::vector<float> pool0 = h.pool.to_float();

  std::vector<int64_t> valid;
  for (int64_t n = 0; n < c.N; ++n)
    if (slots[n] >= 0 && slots[n] < c.P) valid.push_back(n);
  DecodeCase cv = c;
  cv.N = static_cast<int64_t>(valid.size());
  // Rows `valid` of a host [N, ...] buffer, compacted.
  auto gather = [&](const Buffer& b, std::vector<int64_t> shape) {
    const int64_t per = b.numel() / c.N;
    const std::vector<float> x = b.to_float();
    std::vector<float> y;
    for (int64_t n : valid) y.insert(y.end(), x.begin() + n * per, x.begin() + (n + 1) * per);
    Buffer r(b.dtype(), std::move(shape));
    r.from_float(y);
    return r;
  };
  DecodeInputs hvalid{gather(h.q, {cv.N, c.H, kD}), gather(h.k, {cv.N, c.H, kD}),
                      gather(h.v, {cv.N, c.HV, kD})};
  hvalid.idx = Buffer(DType::kInt32, {cv.N});
  if (c.fused) {
    hvalid.a = gather(h.a, {cv.N, c.HV});
    hvalid.b = gather(h.b, {cv.N, c.HV});
    hvalid.A_log = h.A_log.to(cpu());
    hvalid.dt_bias = h.dt_bias.to(cpu());
  } else {
    hvalid.g = gather(h.g, {cv.N, c.HV});
    hvalid.beta = gather(h.beta, {cv.N, c.HV});
  }
  std::vector<int32_t> valid_slots;
  for (int64_t n : valid) valid_slots.push_back(slots[n]);
  hvalid.idx.from_int(valid_slots);
  Buffer ref_pool = h.pool.to(cpu());
  Buffer ref_o(c.dt, {cv.N, c.HV, kD});
  ExecOptions co;
  co.backend = Backend::kCPU;
  ASSERT_TRUE(gdn_decode_step(args_of(hvalid, cv, ref_pool, hvalid.idx, ref_o), co).ok());
  const std::vector<float> orf = ref_o.to_float();

  for (const auto& kernel : kKernels) {
    with_kernel(kernel, [&](const GdnKernels& kernels) {
      DecodeInputs d = h.on_device();
      Buffer o = poisoned(c.dt, {c.N, c.HV, kD});
      ASSERT_TRUE(decode_step_with(args_of(d, c, d.pool, d.idx, o), kernels).ok());
      testkit::cuda_synchronize();
      const std::vector<float> og = o.to_float();
      const int64_t per = c.HV * kD;
      std::vector<float> og_valid;
      for (int64_t n : valid) og_valid.insert(og_valid.end(), og.begin() + n * per, og.begin() + (n + 1) * per);
      const auto e = testkit::compare(og_valid, orf);
      std::printf("    %-12s %s\n", "o (valid)", e.str().c_str());
      EXPECT_TRUE(testkit::within(e, testkit::kGdn)) << e.str();
      EXPECT_EQ(e.nan_count, 0) << "o has unwritten (NaN) elements";
      expect_close(d.pool, ref_pool, "state pool");
      for (int64_t n = 0; n < c.N; ++n) {
        if (std::find(valid.begin(), valid.end(), n) != valid.end()) continue;
        for (int64_t i = 0; i < per; ++i) ASSERT_EQ(og[n * per + i], 0.f) << "sequence " << n << " (skipped)";
      }
      expect_untouched(c, valid_slots, pool0, d.pool.to_float());
    });
  }
}

// The key-last pool of vLLM, SGLang and FlashInfer ([P, HV, V, K], passed transposed): its own
// kernel, against the CPU reference on the same layout; unused slots and row padding untouched,
// padding slots (-1) skipped.
DecodeCase key_last(DecodeCase c, int64_t pad = 0) {
  c.key_last = true;
  c.pad = pad;
  return c;
}

TEST(GdnDecodeCuda, KeyLastPool) {
  std::vector<int32_t> slots(32);
  for (int i = 0; i < 32; ++i) slots[i] = (i * 7) % 40;
  run_case(key_last({32, 4, 8, 40, DType::kBFloat16, DType::kFloat32, true}), slots, 31);
}
TEST(GdnDecodeCuda, KeyLastPoolFp16PaddedRows) {
  run_case(key_last({5, 2, 4, 9, DType::kFloat16, DType::kFloat16, false}, 4), {7, 2, 5, 0, 8}, 32);
}
TEST(GdnDecodeCuda, KeyLastPoolSkipsPaddingSlots) {
  run_skipping_case(key_last({6, 1, 2, 8, DType::kBFloat16, DType::kBFloat16, true}),
                    {3, -1, 1, 9, 0, 6}, 33);
}

// Fused gating (g and beta from A_log, a, dt_bias, b), on every kernel and both pool layouts.
DecodeCase fused(DecodeCase c) {
  c.fused = true;
  return c;
}

TEST(GdnDecodeCuda, FusedGatingBf16) {
  std::vector<int32_t> slots(32);
  for (int i = 0; i < 32; ++i) slots[i] = (i * 7) % 40;
  run_case(fused({32, 4, 8, 40, DType::kBFloat16, DType::kBFloat16, true}), slots, 41);
}
TEST(GdnDecodeCuda, FusedGatingFp32GatesManyItems) {
  std::vector<int32_t> slots(256);
  for (int i = 0; i < 256; ++i) slots[i] = (i * 37) % 260;
  run_case(fused({256, 2, 8, 260, DType::kBFloat16, DType::kFloat32, false}), slots, 42);
}
TEST(GdnDecodeCuda, FusedGatingKeyLastPoolWithPadding) {
  run_case(fused(key_last({5, 2, 4, 9, DType::kFloat16, DType::kFloat16, true})), {7, 2, 5, 0, 8},
           43);
  run_skipping_case(fused(key_last({6, 1, 2, 8, DType::kBFloat16, DType::kBFloat16, true})),
                    {3, -1, 1, 9, 0, 6}, 44);
}
TEST(GdnDecodeCuda, FusedGatingSkipsPaddingSlots) {
  run_skipping_case(fused({4, 1, 2, 5, DType::kBFloat16, DType::kFloat32, false}), {3, -1, 1, 8},
                    45);
}

TEST(GdnDecodeCuda, OutOfRangeDeviceIndexSkipsSequence) {
  run_skipping_case({4, 1, 2, 5, DType::kBFloat16, DType::kFloat32, false}, {3, -1, 1, 8}, 21);
}

// Skipped sequences among many items per CTA: a skipped item's stage still completes its phase,
// so the ring stays in step for the items after it.
TEST(GdnDecodeCuda, ManyItemsWithSkippedSequences) {
  std::vector<int32_t> slots(300);
  for (int i = 0; i < 300; ++i) slots[i] = (i * 41) % 310;
  for (int i : {0, 7, 8, 133, 200, 299}) slots[i] = -1 - i;
  for (int i : {50, 51, 250}) slots[i] = 310 + i;
  run_skipping_case({300, 2, 8, 310, DType::kBFloat16, DType::kBFloat16, true}, slots, 22);
}

}  // namespace
}  // namespace attnkit::gdn_test
