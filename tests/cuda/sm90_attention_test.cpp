// Hopper (sm_90a) prefill kernels against the CPU reference, forced with Backend::kCudaSm90: head
// dims x dtypes x {no mask, causal}, GQA, batches, several work tiles per CTA of the persistent
// grid, lengths that are not tile multiples, Sq != Sk with causal (rows with no visible key),
// strided views, large logits, bit-identical reruns, and requests the kernels must refuse. The
// features (varlen, masks, softcap, sinks) are in sm90_features_test.cpp.
// Skipped (visibly) on GPUs that are not Hopper.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "sm90_test_util.h"

namespace attnkit::test {
namespace {

void check_sm90(const AttnCase& c) {
  SCOPED_TRACE(c.str());
  GpuRun r = run_on_gpu(c, sm90_opts());
  EXPECT_EQ(r.plan.backend, Backend::kCudaSm90);
  EXPECT_EQ(r.plan.kernel.rfind("sm90_fwd_", 0), 0u) << r.plan.kernel;
  expect_gpu_matches(r);
}

TEST(Sm90Prefill, HeadDimsDtypesMasks) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 1000;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (bool causal : {false, true}) {
        AttnCase c = sm90_base(2, 200, 333, ++seed);
        c.dtype = dt;
        c.dqk = c.dv = d;
        if (causal) c.mask = Mask::causal();
        check_sm90(c);
      }
}

TEST(Sm90Prefill, LengthsNotTileMultiples) {
  SKIP_UNLESS_HOPPER();
  const std::pair<int, int> lens[] = {{17, 1},     {77, 77},   {128, 128}, {129, 255},
                                      {1013, 1013}, {77, 1013}, {1013, 77}, {300, 1000}};
  uint64_t seed = 2000;
  for (int d : {64, 128, 256})
    for (auto [sq, sk] : lens)
      for (bool causal : {false, true}) {
        AttnCase c = sm90_base(1, sq, sk, ++seed);
        c.dqk = c.dv = d;
        if (causal) c.mask = Mask::causal();
        check_sm90(c);
      }
}

TEST(Sm90Prefill, CausalSqLongerThanSkHasEmptyRows) {
  SKIP_UNLESS_HOPPER();
  // Rows i < Sq - Sk see no key: O = 0 and LSE = -inf (whole query tiles among them).
  uint64_t seed = 3000;
  for (auto [sq, sk] : {std::pair{500, 100}, {300, 1}, {1013, 77}}) {
    AttnCase c = sm90_base(2, sq, sk, ++seed);
    c.mask = Mask::causal();
    check_sm90(c);
  }
}

TEST(Sm90Prefill, PersistentGridWithManyTilesPerCta) {
  SKIP_UNLESS_HOPPER();
  // More work tiles (128 query rows of one head) than an H100 has SMs, so each CTA of the
  // persistent grid (no mask) walks several tiles through the same K/V pipelines and one Q buffer;
  // the causal cases (the pair grid at d128 / d256, the longest-first one at d64 past 1024 rows)
  // with Sq >> Sk mix tiles that see no key (written without loading anything) with tiles that do.
  uint64_t seed = 3500;
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      AttnCase c = causal ? sm90_base(2, 1500, 200, ++seed) : sm90_base(2, 1100, 300, ++seed);
      c.hq = 16;
      c.hkv = 4;
      c.dqk = c.dv = d;
      if (causal) c.mask = Mask::causal();
      check_sm90(c);
    }
  // Causal with batched contiguous K/V runs on the persistent pair grid up to 8192 query rows
  // (1024 at d64, with 128-row tiles; sm90_dispatch.cu): a CTA takes query tiles M-1-j and j of
  // one head. 6 x 16 heads x 4 query tiles are several pairs per CTA; 300 rows (3 query tiles)
  // leave the middle tile without a partner, whose slot the kernel skips.
  for (int d : {64, 128, 256})
    for (int s : {500, 300}) {
      AttnCase c = sm90_base(6, s, s, ++seed);
      c.hq = 16;
      c.hkv = 4;
      c.dqk = c.dv = d;
      c.mask = Mask::causal();
      check_sm90(c);
    }
}

TEST(Sm90Prefill, WideKvTilesForLongKeysAtD256) {
  SKIP_UNLESS_HOPPER();
  // d256 without a mask takes 80-key tiles from 8192 keys on (sm90_dispatch.cu). 8250 and 8200
  // keys end in a tile that overlaps the one before it; 3 x 48 heads of one query tile each are
  // more work tiles than an H100 has SMs, so CTAs of the persistent grid walk several.
  uint64_t seed = 3700;
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    AttnCase c = sm90_base(1, 300, 8250, ++seed);
    c.dtype = dt;
    c.dqk = c.dv = 256;
    SCOPED_TRACE(c.str());
    GpuRun r = run_on_gpu(c, sm90_opts());
    const std::string dtype = dt == DType::kBFloat16 ? "bf16" : "fp16";
    EXPECT_EQ(r.plan.kernel, "sm90_fwd_d256_" + dtype + "_none_n80");
    expect_gpu_matches(r);
  }
  AttnCase c = sm90_base(3, 17, 8200, ++seed);
  c.hq = 48;
  c.hkv = 8;
  c.dqk = c.dv = 256;
  {
    SCOPED_TRACE(c.str());
    GpuRun r = run_on_gpu(c, sm90_opts());
    EXPECT_EQ(r.plan.kernel, "sm90_fwd_d256_bf16_none_n80");
    expect_gpu_matches(r);
  }
  // Below 8192 keys, or causal: the 64-key tiles.
  for (auto [sk, causal] : {std::pair{8191, false}, {8250, true}}) {
    AttnCase s = sm90_base(1, 100, sk, ++seed);
    s.dqk = s.dv = 256;
    if (causal) s.mask = Mask::causal();
    AttnData d = make_attn_data(s).to(cuda());
    AttentionPlan plan;
    ASSERT_TRUE(plan_attention(d.args(), sm90_opts(), &plan).ok());
    EXPECT_EQ(plan.kernel, causal ? "sm90_fwd_d256_bf16_causal" : "sm90_fwd_d256_bf16_none");
  }
}

TEST(Sm90Prefill, GqaRatiosAndBatches) {
  SKIP_UNLESS_HOPPER();
  const int heads[][2] = {{1, 1}, {8, 1}, {7, 7}, {8, 2}, {12, 4}};
  uint64_t seed = 4000;
  for (const auto& h : heads)
    for (bool causal : {false, true}) {
      AttnCase c = sm90_base(3, 150, 260, ++seed);
      c.hq = h[0];
      c.hkv = h[1];
      if (causal) c.mask = Mask::causal();
      check_sm90(c);
    }
}

TEST(Sm90Prefill, StridedNoLseLargeLogitsScale) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 5000;
  for (int variant = 0; variant < 4; ++variant)
    for (bool causal : {false, true}) {
      AttnCase c = sm90_base(2, 190, 211, ++seed);
      if (causal) c.mask = Mask::causal();
      switch (variant) {
        case 0: c.strided = true; break;
        case 1: c.lse = false; break;
        case 2: c.qk_scale = 3.f; break;
        case 3: c.scale = 0.02f; c.dtype = DType::kFloat16; break;
      }
      check_sm90(c);
    }
}

TEST(Sm90Prefill, RerunsAreBitIdentical) {
  SKIP_UNLESS_HOPPER();
  for (bool causal : {false, true}) {
    AttnCase c = sm90_base(2, 700, 900, causal ? 6001 : 6000);
    if (causal) c.mask = Mask::causal();
    GpuRun r = run_on_gpu(c, sm90_opts());
    expect_gpu_matches(r);
    expect_rerun_bit_identical(r, sm90_opts());
  }
}

TEST(Sm90Prefill, AutoPicksSm90OnHopper) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = sm90_base(1, 256, 256, 7000);
  c.mask = Mask::causal();
  GpuRun r = run_on_gpu(c, ExecOptions{});
  EXPECT_EQ(r.plan.backend, Backend::kCudaSm90) << r.plan.kernel;
  expect_gpu_matches(r);
}

TEST(Sm90Prefill, RefusesWhatItDoesNotServe) {
  SKIP_UNLESS_HOPPER();
  struct Case {
    const char* what;
    AttnCase c;
  };
  std::vector<Case> cases;
  auto add = [&](const char* what, auto edit) {
    AttnCase c = sm90_base(2, 100, 120, 8000 + cases.size());
    edit(c);
    cases.push_back({what, c});
  };
  // (Ragged Q / K, seqused_k, window / chunked masks, softcap and sinks, head dims 192/128 and 96
  // with no mask or causal run on sm90: see sm90_features_test.cpp; paged KV with page sizes that
  // are a multiple of the KV tile: sm90_paged_test.cpp; split-KV: sm90_split_test.cpp.)
  add("paged kv, page size 16", [](AttnCase& c) { c.kv = KvKind::kPaged; });
  add("paged kv with sinks", [](AttnCase& c) {
    c.kv = KvKind::kPaged;
    c.page_size = 128;
    c.sinks = true;
  });
  add("alibi", [](AttnCase& c) { c.alibi = true; });
  add("softcap with sinks", [](AttnCase& c) { c.softcap = 30.f; c.sinks = true; });
  add("negative scale", [](AttnCase& c) { c.scale = -0.1f; });
  add("dqk 192 / dv 128 with a window", [](AttnCase& c) {
    c.dqk = 192;
    c.dv = 128;
    c.mask = Mask::sliding_window(30, 0);
  });
  add("head dim 96 with softcap", [](AttnCase& c) { c.dqk = c.dv = 96; c.softcap = 30.f; });
  add("head dim 192", [](AttnCase& c) { c.dqk = c.dv = 192; });
  add("decode", [](AttnCase& c) { c.seqlens_q = {1, 1}; });
  for (const Case& k : cases) {
    AttnData d = make_attn_data(k.c).to(cuda());
    AttentionPlan plan;
    const Status st = plan_attention(d.args(), sm90_opts(), &plan);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << k.what << ": " << st.message();
    // Without forcing, the same request still runs (on the portable kernels).
    const Status auto_st = plan_attention(d.args(), ExecOptions{}, &plan);
    EXPECT_TRUE(auto_st.ok()) << k.what << ": " << auto_st.message();
    EXPECT_EQ(plan.backend, Backend::kCudaPortable) << k.what;
  }
}

}  // namespace
}  // namespace attnkit::test
