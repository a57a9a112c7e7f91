// CPU backend vs the naive fp64 reference over the option space: masks x layouts, head dims x
// dtypes, GQA ratios, page sizes, score modifiers, sinks, LSE, scale, strides.
#include <gtest/gtest.h>

#include <vector>

#include "cpu/cpu_attention_util.h"

namespace attnkit::test {
namespace {

const DType kDtypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};

std::vector<Mask> all_masks() {
  return {Mask::none(),
          Mask::causal(),
          Mask::sliding_window(8, 0),
          Mask::sliding_window(5, 3),
          Mask::sliding_window(6, -1),   // left only
          Mask::sliding_window(-1, 4),   // right only
          Mask::sliding_window(0, 0),    // the diagonal key alone
          Mask::chunked(16),
          Mask::chunked(16, /*causal=*/true),
          Mask{7, 2, 12}};               // window and chunks together
}

// Every mask on every Q/KV layout; the other options rotate with the case index so each one meets
// several masks and layouts.
TEST(CpuAttention, MasksByLayout) {
  const KvKind kvs[] = {KvKind::kContiguous, KvKind::kSeqused, KvKind::kRagged, KvKind::kPaged};
  const int heads[][2] = {{2, 2}, {4, 1}, {7, 1}, {8, 2}};
  const int dims[] = {64, 128, 96};
  int n = 0;
  for (const Mask& mask : all_masks()) {
    for (bool ragged_q : {false, true}) {
      for (KvKind kv : kvs) {
        AttnCase c;
        c.ragged_q = ragged_q;
        c.kv = kv;
        // Batched q needs one length; contiguous KV needs one length. Otherwise uneven, with a
        // sequence that has more queries than keys.
        c.seqlens_q = ragged_q ? std::vector<int>{24, 13, 70} : std::vector<int>{37, 37, 37};
        c.seqlens_k = kv == KvKind::kContiguous ? std::vector<int>{57, 57, 57}
                                                : std::vector<int>{57, 9, 80};
        c.page_size = 16;
        c.mask = mask;
        c.dtype = kDtypes[n % 3];
        c.hq = heads[n % 4][0];
        c.hkv = heads[n % 4][1];
        c.dqk = c.dv = dims[n % 3];
        c.softcap = n % 3 == 1 ? 5.f : 0.f;
        c.alibi = n % 4 == 2;
        c.sinks = n % 5 == 3;
        c.lse = n % 7 != 6;
        c.scale = n % 6 == 5 ? 0.3f : 0.f;
        c.strided = n % 4 == 1;
        c.seed = 1000 + n;
        expect_cpu_matches_naive(c);
        ++n;
      }
    }
  }
}

TEST(CpuAttention, HeadDimsByDtype) {
  const int dims[][2] = {{64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}};
  int n = 0;
  for (auto [dqk, dv] : dims) {
    for (DType dt : kDtypes) {
      AttnCase c;
      c.dtype = dt;
      c.dqk = dqk;
      c.dv = dv;
      c.hq = 4;
      c.hkv = 2;
      c.ragged_q = n % 2 == 1;
      c.kv = n % 2 ? KvKind::kPaged : KvKind::kContiguous;
      c.seqlens_q = c.ragged_q ? std::vector<int>{20, 33} : std::vector<int>{29, 29};
      c.seqlens_k = c.kv == KvKind::kPaged ? std::vector<int>{70, 41} : std::vector<int>{70, 70};
      c.mask = n % 3 == 0 ? Mask::none() : Mask::causal();
      c.seed = 2000 + n++;
      expect_cpu_matches_naive(c);
    }
  }
}

// q head h must read kv head h / (Hq / Hkv); per-head ALiBi slopes and sinks make a wrong head
// mapping visible even where the kv heads are similar.
TEST(CpuAttention, GqaRatios) {
  const int heads[][2] = {{3, 3}, {4, 1}, {8, 2}, {7, 1}, {14, 2}, {8, 1}, {16, 2}};
  int n = 0;
  for (auto [hq, hkv] : heads) {
    for (KvKind kv : {KvKind::kContiguous, KvKind::kPaged}) {
      AttnCase c = AttnCase::uniform(2, 19, 45);
      c.kv = kv;
      c.hq = hq;
      c.hkv = hkv;
      c.mask = Mask::causal();
      c.alibi = n % 2 == 0;
      c.sinks = true;
      c.dtype = DType::kFloat32;
      c.seed = 3000 + n++;
      expect_cpu_matches_naive(c);
    }
  }
}

TEST(CpuAttention, PageSizes) {
  int n = 0;
  for (int ps : {1, 16, 48, 256}) {
    for (Mask mask : {Mask::none(), Mask::causal(), Mask::sliding_window(20, 0)}) {
      AttnCase c;
      c.kv = KvKind::kPaged;
      c.page_size = ps;
      c.ragged_q = true;
      c.seqlens_q = {1, 30, 7};
      c.seqlens_k = {300, 47, 530};
      c.hq = 4;
      c.hkv = 1;
      c.mask = mask;
      c.invalid_page_padding = n % 2 == 0;  // unused table entries must never be read
      c.dtype = n % 2 ? DType::kFloat16 : DType::kBFloat16;
      c.seed = 4000 + n++;
      expect_cpu_matches_naive(c);
    }
  }
}

TEST(CpuAttention, ScoreModifiers) {
  struct Mods {
    float softcap;
    bool alibi, sinks;
  };
  const Mods mods[] = {{0, false, false}, {2.f, false, false}, {30.f, false, false},
                       {0, true, false},  {0, false, true},    {3.f, true, true}};
  int n = 0;
  for (const Mods& m : mods) {
    for (Mask mask : {Mask::none(), Mask::causal(), Mask::sliding_window(10, 2)}) {
      AttnCase c = AttnCase::uniform(2, 33, 65);
      c.ragged_q = n % 2 == 1;
      c.kv = n % 2 ? KvKind::kRagged : KvKind::kSeqused;
      c.hq = 4;
      c.hkv = 2;
      c.softcap = m.softcap;
      c.alibi = m.alibi;
      c.sinks = m.sinks;
      c.mask = mask;
      c.qk_scale = 2.f;  // scores of a few units, where softcap bends them
      c.dtype = DType::kFloat32;
      c.seed = 5000 + n++;
      expect_cpu_matches_naive(c);
    }
  }
}

TEST(CpuAttention, ScaleLseAndStrides) {
  int n = 0;
  for (float scale : {0.f, 0.05f, 1.f}) {
    for (bool lse : {true, false}) {
      for (bool strided : {false, true}) {
        AttnCase c = AttnCase::uniform(2, 17, 40);
        c.scale = scale;
        c.lse = lse;
        c.strided = strided;
        c.ragged_q = n % 2 == 0;
        c.kv = n % 3 == 0 ? KvKind::kPaged : KvKind::kContiguous;
        c.mask = Mask::causal();
        c.hq = 4;
        c.hkv = 2;
        c.dtype = kDtypes[n % 3];
        c.seed = 6000 + n++;
        expect_cpu_matches_naive(c);
      }
    }
  }
}

}  // namespace
}  // namespace attnkit::test
