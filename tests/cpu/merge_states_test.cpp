// merge_states on the CPU: merging attention over disjoint key ranges equals attention over all
// keys; empty states (LSE = -inf) are ignored; and the op matches naive_merge_states.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/cpu_attention_util.h"
#include "testkit/naive.h"

namespace attnkit::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A view of keys [start, start + len) of a contiguous [1, Sk, H, D] tensor.
TensorView key_slice(const TensorView& t, int64_t start, int64_t len) {
  TensorView s = t;
  s.data = static_cast<char*>(t.data) + start * t.stride[1] * static_cast<int64_t>(dtype_size(t.dtype));
  s.shape[1] = len;
  return s;
}

// Slice n of a tensor [N, ...] as a view [1, ...].
TensorView part(const TensorView& t, int64_t n) {
  TensorView s = t;
  s.data = static_cast<char*>(t.data) + n * t.stride[0] * static_cast<int64_t>(dtype_size(t.dtype));
  s.shape[0] = 1;
  return s;
}

// [1, A, B, ...] -> [A, B, ...]
TensorView drop_batch(const TensorView& t) {
  TensorView s = t;
  for (int d = 0; d + 1 < t.ndim; ++d) {
    s.shape[d] = t.shape[d + 1];
    s.stride[d] = t.stride[d + 1];
  }
  s.shape[t.ndim - 1] = 0;
  s.stride[t.ndim - 1] = 0;
  s.ndim = t.ndim - 1;
  return s;
}

// Attention over each key range with LSE, merged, vs the naive reference over all keys.
void check_split(DType dt, const std::vector<int>& lens, float softcap, uint64_t seed) {
  int sk = 0;
  for (int l : lens) sk += l;
  AttnCase c = AttnCase::uniform(1, 37, sk);
  c.dtype = dt;
  c.hq = 4;
  c.hkv = 2;
  c.softcap = softcap;
  c.seed = seed;
  SCOPED_TRACE(c.str() + " parts " + std::to_string(lens.size()));
  const AttnData full = make_attn_data(c);
  const Reference ref = naive_reference(full);

  const int64_t n = static_cast<int64_t>(lens.size());
  testkit::Buffer o_parts(dt, {n, 37, c.hq, c.dv}), lse_parts(DType::kFloat32, {n, 37, c.hq});
  o_parts.poison();
  lse_parts.poison();
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    AttentionArgs a = full.args();
    a.k = key_slice(full.k.view, start, lens[i]);
    a.v = key_slice(full.v.view, start, lens[i]);
    a.o = part(o_parts.view(), i);
    a.lse = part(lse_parts.view(), i);
    const Status st = attention_forward(a, cpu_opts());
    ASSERT_TRUE(st.ok()) << st.message();
    // An empty state's O must never be read: make any read visible.
    if (lens[i] == 0) std::memset(a.o.data, 0xFF, o_parts.bytes() / n);
    start += lens[i];
  }

  testkit::Buffer o(dt, {37, c.hq, c.dv}), lse(DType::kFloat32, {37, c.hq});
  o.poison();
  lse.poison();
  MergeStatesArgs m{o_parts.view(), lse_parts.view(), o.view(), lse.view()};
  const Status st = merge_states(m, cpu_opts());
  ASSERT_TRUE(st.ok()) << st.message();
  // fp32 parts: only fp32 rounding separates the merge from one pass over all keys. 16-bit parts
  // carry one rounding of each partial O and one of the result.
  const testkit::Tolerance o_tol =
      dt == DType::kFloat32 ? testkit::Tolerance{1e-5, 1e-5} : cpu_o_tolerance(dt);
  EXPECT_TRUE(close_to(o.to_float(), ref.o, o_tol, "merged O"));
  EXPECT_TRUE(close_to(lse.to_float(), ref.lse, cpu_lse_tolerance(), "merged LSE"));
}

TEST(CpuMergeStates, SplitKeysThenMergeEqualsFullAttention) {
  uint64_t seed = 100;
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    check_split(dt, {150}, 0.f, seed++);
    check_split(dt, {64, 86}, 0.f, seed++);
    check_split(dt, {1, 70, 79}, 4.f, seed++);
    check_split(dt, {40, 0, 60, 0, 50}, 0.f, seed++);  // empty parts in between
    check_split(dt, {0, 150, 0}, 0.f, seed++);
  }
}

TEST(CpuMergeStates, AllStatesEmpty) {
  const int64_t n = 3, t = 5, h = 2, d = 64;
  testkit::Buffer o_parts(DType::kFloat32, {n, t, h, d}), lse_parts(DType::kFloat32, {n, t, h});
  o_parts.poison();  // NaN: must not be read
  lse_parts.from_float(std::vector<float>(n * t * h, -kInf));
  testkit::Buffer o(DType::kBFloat16, {t, h, d}), lse(DType::kFloat32, {t, h});
  o.poison();
  lse.poison();
  ASSERT_TRUE(merge_states({o_parts.view(), lse_parts.view(), o.view(), lse.view()}, cpu_opts()).ok());
  for (float x : o.to_float()) ASSERT_EQ(x, 0.f);
  for (float x : lse.to_float()) ASSERT_EQ(x, -kInf);
}

// Random states (some empty, some rows all empty, large LSEs), strided views and mixed dtypes vs
// naive_merge_states.
TEST(CpuMergeStates, MatchesNaive) {
  std::mt19937_64 rng(7);
  int k = 0;
  for (DType part_dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (DType out_dt : {DType::kFloat32, DType::kBFloat16}) {
      for (bool with_lse : {true, false}) {
        const int64_t n = 1 + k % 4, t = 23, h = 3, d = 128;
        SCOPED_TRACE(std::string(to_string(part_dt)) + " -> " + to_string(out_dt) + " n=" +
                     std::to_string(n) + (with_lse ? "" : " no-lse"));
        // o_parts rows padded (stride d + 8); lse_parts stored [h, t, n] and viewed as [n, t, h].
        testkit::Buffer o_parts(part_dt, {n, t, h, d + 8}), lse_parts(DType::kFloat32, {h, t, n});
        testkit::fill_normal(o_parts, rng);
        TensorView op = o_parts.view();
        op.shape[3] = d;
        TensorView lp = make_view(lse_parts.data(), DType::kFloat32, {n, t, h}, {1, n, t * n});
        std::vector<float> l(n * t * h);
        std::uniform_real_distribution<float> u(-6.f, 6.f);
        for (auto& x : l) x = u(rng) + (k % 3 == 2 ? 1000.f : 0.f);  // large but finite
        for (int64_t i = 0; i < n * t * h; i += 3) l[i] = -kInf;      // empty states
        for (int64_t ni = 0; ni < n; ++ni) l[ni] = -kInf;             // (t, h) = (0, 0) all empty
        lse_parts.from_float(l);
        // Poison the O of every empty state.
        for (int64_t ni = 0; ni < n; ++ni)
          for (int64_t ti = 0; ti < t; ++ti)
            for (int64_t hi = 0; hi < h; ++hi)
              if (l[hi * t * n + ti * n + ni] == -kInf)
                std::memset(static_cast<char*>(op.data) +
                                ((ni * t + ti) * h + hi) * (d + 8) * dtype_size(part_dt),
                            0xFF, d * dtype_size(part_dt));

        testkit::Buffer o(out_dt, {t, h, d}), lse(DType::kFloat32, {t, h});
        o.poison();
        lse.poison();
        MergeStatesArgs m{op, lp, o.view(), with_lse ? lse.view() : TensorView{}};
        const Status st = merge_states(m, cpu_opts());
        ASSERT_TRUE(st.ok()) << st.message();
        std::vector<double> ro, rl;
        ASSERT_TRUE(testkit::naive_merge_states(m, &ro, &rl).ok());
        const std::vector<float> ref_o(ro.begin(), ro.end()), ref_l(rl.begin(), rl.end());
        const testkit::Tolerance o_tol =
            out_dt == DType::kFloat32 ? testkit::Tolerance{1e-6, 1e-5} : cpu_o_tolerance(out_dt);
        EXPECT_TRUE(close_to(o.to_float(), ref_o, o_tol, "O"));
        if (with_lse) EXPECT_TRUE(close_to(lse.to_float(), ref_l, cpu_lse_tolerance(), "LSE"));
        else for (float x : lse.to_float()) ASSERT_TRUE(std::isnan(x));  // untouched
        ++k;
      }
    }
  }
}

}  // namespace
}  // namespace attnkit::test
