// Portable CUDA attention (prefill shapes) against the CPU reference: head dims x dtypes, masks,
// score modifiers, sinks, layouts (contiguous, seqused, ragged, paged), GQA ratios, edge shapes.
#include <gtest/gtest.h>

#include "gpu_attention_util.h"

namespace attnkit::test {
namespace {

AttnCase base(int batch, int sq, int sk, uint64_t seed) { return gqa_case(batch, sq, sk, seed); }

TEST(PortablePrefill, HeadDimsByDtype) {
  const int dims[][2] = {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};
  uint64_t seed = 100;
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (const auto& d : dims)
      for (bool causal : {false, true}) {
        AttnCase c = base(2, 77, 131, ++seed);
        c.dtype = dt;
        c.dqk = d[0];
        c.dv = d[1];
        if (causal) c.mask = Mask::causal();
        check_case(c);
      }
}

TEST(PortablePrefill, Masks) {
  const Mask masks[] = {Mask::causal(),          Mask::sliding_window(32, 0),
                        Mask::sliding_window(16, 8), Mask::sliding_window(-1, 5),
                        Mask::sliding_window(0, 0),  Mask::chunked(64),
                        Mask::chunked(48, true),     {20, 3, 32}};
  uint64_t seed = 200;
  for (const Mask& m : masks)
    for (auto [sq, sk] : {std::pair{150, 150}, {97, 300}, {300, 97}}) {
      AttnCase c = base(2, sq, sk, ++seed);
      c.mask = m;
      check_case(c);
    }
}

TEST(PortablePrefill, ScoreModsAndSinks) {
  uint64_t seed = 300;
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (int variant = 0; variant < 6; ++variant) {
      AttnCase c = base(2, 100, 180, ++seed);
      c.dtype = dt;
      switch (variant) {
        case 0: c.softcap = 30.f; c.qk_scale = 3.f; break;
        case 1: c.alibi = true; break;
        case 2: c.sinks = true; break;
        case 3: c.softcap = 20.f; c.alibi = true; c.sinks = true; c.mask = Mask::causal(); break;
        case 4: c.sinks = true; c.mask = Mask::sliding_window(8, 0); break;
        case 5: c.alibi = true; c.mask = Mask::chunked(32, true); c.scale = 0.05f; break;
      }
      check_case(c);
    }
}

TEST(PortablePrefill, Layouts) {
  uint64_t seed = 400;
  for (KvKind kv : {KvKind::kContiguous, KvKind::kSeqused, KvKind::kRagged, KvKind::kPaged})
    for (bool ragged_q : {false, true})
      for (bool causal : {false, true}) {
        AttnCase c = base(3, 65, 129, ++seed);
        c.kv = kv;
        c.ragged_q = ragged_q;
        if (kv != KvKind::kContiguous) c.seqlens_k = {129, 40, 201};
        if (ragged_q) c.seqlens_q = {65, 1, 130};
        if (kv == KvKind::kContiguous) c.seqlens_k = {129, 129, 129};
        if (causal) c.mask = Mask::causal();
        check_case(c);
      }
}

TEST(PortablePrefill, PageSizes) {
  uint64_t seed = 500;
  for (int ps : {1, 16, 48, 256})
    for (bool causal : {false, true}) {
      AttnCase c = base(2, 33, 300, ++seed);
      c.kv = KvKind::kPaged;
      c.page_size = ps;
      c.seqlens_k = {300, 77};
      c.invalid_page_padding = ps == 48;
      if (causal) c.mask = Mask::causal();
      check_case(c);
    }
}

TEST(PortablePrefill, GqaRatios) {
  uint64_t seed = 600;
  for (auto [hq, hkv] : {std::pair{2, 2}, {8, 2}, {7, 1}, {8, 1}, {16, 2}})
    for (bool causal : {false, true}) {
      AttnCase c = base(2, 45, 90, ++seed);
      c.hq = hq;
      c.hkv = hkv;
      if (causal) c.mask = Mask::causal();
      check_case(c);
    }
}

TEST(PortablePrefill, EdgeShapes) {
  uint64_t seed = 700;
  {  // zero-length sequences in a ragged batch, very uneven lengths
    AttnCase c = base(4, 1, 1, ++seed);
    c.ragged_q = true;
    c.kv = KvKind::kRagged;
    c.seqlens_q = {0, 300, 5, 1};
    c.seqlens_k = {10, 0, 700, 1};
    c.q_tail_rows = 0;
    check_case(c);
    c.mask = Mask::causal();
    c.seed = ++seed;
    check_case(c);
  }
  {  // paged with an empty sequence
    AttnCase c = base(3, 4, 1, ++seed);
    c.kv = KvKind::kPaged;
    c.seqlens_k = {0, 37, 160};
    check_case(c);
  }
  {  // Sq > Sk, causal: the first rows see no key (O = 0, LSE = -inf)
    AttnCase c = base(2, 90, 20, ++seed);
    c.mask = Mask::causal();
    check_case(c);
    c.sinks = true;
    c.seed = ++seed;
    check_case(c);
  }
  {  // one token
    AttnCase c = base(1, 1, 1, ++seed);
    check_case(c);
  }
  {  // prime lengths
    AttnCase c = base(1, 1013, 777, ++seed);
    c.hq = 8;
    c.hkv = 2;
    check_case(c);
    c.mask = Mask::causal();
    c.seed = ++seed;
    check_case(c);
  }
  {  // rows fully masked by a window (diagonal only, Sq > Sk)
    AttnCase c = base(2, 70, 50, ++seed);
    c.mask = Mask::sliding_window(0, 0);
    check_case(c);
  }
  {  // large logits: no overflow
    AttnCase c = base(2, 64, 200, ++seed);
    c.qk_scale = 6.f;
    check_case(c);
    c.dtype = DType::kFloat16;
    c.seed = ++seed;
    check_case(c);
  }
  {  // strided views, no LSE
    AttnCase c = base(2, 50, 70, ++seed);
    c.strided = true;
    check_case(c);
    c.lse = false;
    c.seed = ++seed;
    check_case(c);
  }
  {  // ragged q with rows that belong to no sequence: never written by the reference either
    AttnCase c = base(2, 1, 1, ++seed);
    c.ragged_q = true;
    c.seqlens_q = {30, 40};
    c.seqlens_k = {50, 50};
    c.q_tail_rows = 0;
    check_case(c);
  }
}

// Lengths on both sides of the prefill tiles' row and key blocks (128 x 128 at d64 without a mask,
// 128 x 64 at d64 masked, d128 and d256 without a mask (8 warps in pairs), 64 x 64 at 192/128 and
// d256 masked (in pairs)): the last, partly masked key tile, fully visible tiles that skip the
// mask next to diagonal ones, and row tiles that end inside a warp's rows.
TEST(PortablePrefill, TileBoundaries) {
  const int dims[][2] = {{64, 64}, {128, 128}, {192, 128}, {256, 256}};
  uint64_t seed = 1000;
  for (const auto& d : dims)
    for (auto [sq, sk] : {std::pair{31, 33}, {129, 128}, {64, 191}, {160, 97}})
      for (bool causal : {false, true}) {
        AttnCase c = base(2, sq, sk, ++seed);
        c.dqk = d[0];
        c.dv = d[1];
        if (causal) c.mask = Mask::causal();
        check_case(c);
      }
}

// The running max moves (and O is rescaled) only when a row's max grows by more than 2^8 (the
// lazy rescale): large logits over many key tiles make maxima that grow both by less and by more
// than that from tile to tile, at every head dim and tile kind (d256: warp pairs), with and
// without the causal diagonal, and with the fp32 partials of explicit splits. (Such logits make O
// nearly single V rows; v is scaled down so that one bf16 rounding step of O stays inside the
// max-abs bound: with V ~ N(0, 1) a 1-ulp difference at |O| >= 4 is 0.031.)
TEST(PortablePrefill, RunningMaxJumps) {
  const int dims[][2] = {{64, 64}, {128, 128}, {256, 256}};
  uint64_t seed = 1050;
  for (const auto& d : dims)
    for (bool causal : {false, true})
      for (int splits : {0, 3}) {
        AttnCase c = base(2, 150, 700, ++seed);
        c.dqk = d[0];
        c.dv = d[1];
        c.qk_scale = 3.f;
        c.v_scale = 0.25f;
        c.num_splits = splits;
        if (causal) c.mask = Mask::causal();
        check_case(c);
      }
}

// The plain kernels fold a positive scale into exp2 after the row max; a negative one must go to
// the generic variant and still match. Explicit split counts run the prefill tiles' fp32 partials.
TEST(PortablePrefill, ScaleSignAndSplits) {
  uint64_t seed = 1100;
  for (float scale : {-0.09f, 0.2f})
    for (bool causal : {false, true}) {
      AttnCase c = base(2, 70, 150, ++seed);
      c.scale = scale;
      if (causal) c.mask = Mask::causal();
      SCOPED_TRACE(c.str());
      const GpuRun r = run_on_gpu(c);
      const bool generic = r.plan.kernel.find("SoftcapAlibiMod") != std::string::npos;
      EXPECT_EQ(generic, scale < 0) << r.plan.kernel;
      expect_gpu_matches(r);
    }
  for (int dqk : {64, 128, 256})
    for (int splits : {1, 3})
      for (bool causal : {false, true}) {
        AttnCase c = base(1, 200, 333, ++seed);
        c.dqk = c.dv = dqk;
        c.num_splits = splits;
        c.sinks = causal;
        if (causal) c.mask = Mask::causal();
        SCOPED_TRACE(c.str());
        const GpuRun r = run_on_gpu(c);
        EXPECT_EQ(r.plan.num_splits, splits) << r.plan.kernel;
        expect_gpu_matches(r);
      }
}

// Masked d256 calls with at most 512 query rows (tokens x group) per head run the tile without
// warp pairs, longer ones the pairs (fwd_launch.cuh, ShortMaskedTile): both sides of the cut, one
// query head per KV head and two, with large logits (the lazy rescale) and split-KV partials.
TEST(PortablePrefill, D256MaskedTileByRows) {
  const Mask masks[] = {Mask::causal(), Mask::sliding_window(100, 0)};
  uint64_t seed = 1150;
  for (auto [hq, sq] : {std::pair{2, 512}, {2, 513}, {4, 256}, {4, 257}})
    for (const Mask& m : masks)
      for (int splits : {1, 3}) {
        AttnCase c = gqa_case(1, sq, sq + 37, ++seed, hq, 2);
        c.dqk = c.dv = 256;
        c.mask = m;
        c.qk_scale = 3.f;
        c.v_scale = 0.25f;
        c.num_splits = splits;
        SCOPED_TRACE(c.str());
        const GpuRun r = run_on_gpu(c);
        EXPECT_EQ(r.plan.num_splits, splits) << r.plan.kernel;
        EXPECT_NE(r.plan.kernel.find("256_256_bf16_WindowChunkMask_NoScoreMod"), std::string::npos)
            << r.plan.kernel;
        expect_gpu_matches(r);
      }
}

// One query head per KV head over several row tiles (128 rows; d256: in warp pairs, 64 rows with
// a mask): with a mask, a warp (pair) skips the key tiles past the last one its rows see (the
// causal diagonal's last tile for the upper two warps), and O rows (each pair warp's Dv half) are
// written from one base; windows and chunks end the warps' key ranges elsewhere, Sq != Sk shifts
// them, and split-KV cuts the CTA's key range before the warp's cut.
TEST(PortablePrefill, MhaWarpKeyRanges) {
  const Mask masks[] = {Mask::none(), Mask::causal(), Mask::sliding_window(100, 0),
                        Mask::chunked(96)};
  uint64_t seed = 1200;
  for (int d : {64, 128, 256})
    for (const Mask& m : masks)
      for (auto [sq, sk] : {std::pair{300, 300}, {200, 457}})
        for (int splits : {1, 3}) {
          AttnCase c = gqa_case(2, sq, sk, ++seed, 2, 2);
          c.dqk = c.dv = d;
          c.mask = m;
          c.num_splits = splits;
          SCOPED_TRACE(c.str());
          const GpuRun r = run_on_gpu(c);
          EXPECT_EQ(r.plan.num_splits, splits) << r.plan.kernel;
          EXPECT_EQ(r.plan.kernel.rfind("portable_fwd_", 0), 0u) << r.plan.kernel;
          expect_gpu_matches(r);
        }
}

TEST(PortablePrefill, DeviceIndicesValidated) {
  AttnCase c = base(3, 1, 1, 800);
  c.ragged_q = true;
  c.kv = KvKind::kPaged;
  c.seqlens_q = {20, 3, 70};
  c.seqlens_k = {100, 7, 70};
  c.mask = Mask::causal();
  ExecOptions o = portable_opts();
  o.validate_device_indices = true;
  check_case(c, o);
}

TEST(PortablePrefill, UnsupportedHeadDimIsReported) {
  AttnCase c = base(1, 8, 8, 900);
  c.dqk = c.dv = 32;
  AttnData d = make_attn_data(c).to(cuda());
  AttentionPlan plan;
  const Status st = plan_attention(d.args(), portable_opts(), &plan);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("head dim"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace attnkit::test
