// The chunk-output stage op (gdn_chunk_output) on the GPU vs the CPU reference, on random q, k,
// v_new, h and gates (the stage alone, not fed by a pipeline), through each of its kernels: the
// default (on sm_90 with bf16 operands, the WGMMA/TMA kernel: a persistent grid walking (chunk,
// q/k head, value head) stages) and, with GdnKernels::mma_sync, the mma.sync kernel that other
// GPUs run. Cases: many stages per CTA (~8 on a 132-SM H100, shares that split a q/k head's
// group), ragged batches with an empty sequence, one shorter than a chunk and lengths that are
// not multiples of 64, HV = H, 2H and 3H, fp16 q/k. In the ragged cases the rows past the last
// sequence hold NaN in v_new and the output is poisoned: those rows must stay unwritten, and a
// kernel that multiplied P by v_new past a chunk's end (instead of selecting) would spread the NaN
// into the last sequence.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/gdn_cuda_util.h"

namespace attnkit::gdn_test {
namespace {

constexpr int64_t kD = 128;

struct OutCase {
  int64_t B, T, H, HV;
  std::vector<int32_t> cu;  // empty: dense; cu.back() may stop short of T
  DType dt = DType::kBFloat16;
  int64_t rows() const { return cu.empty() ? B * T : cu.back(); }  // rows inside sequences
};

void run_output(const OutCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t C = count_chunks(c.B, c.T, c.cu);
  const std::vector<int64_t> tokV = {c.B, c.T, c.HV, kD};
  const Buffer q = unit_rows(c.dt, {c.B, c.T, c.H, kD}, rng), k = unit_rows(c.dt, {c.B, c.T, c.H, kD}, rng);
  Buffer vn(DType::kBFloat16, tokV), h(DType::kBFloat16, {C, c.HV, kD, kD});
  testkit::fill_normal(vn, rng);
  testkit::fill_normal(h, rng, 0.f, 0.3f);
  if (!c.cu.empty() && c.rows() < c.T) {  // NaN past the last sequence
    std::vector<float> x = vn.to_float();
    for (size_t i = static_cast<size_t>(c.rows() * c.HV * kD); i < x.size(); ++i) x[i] = std::nanf("");
    vn.from_float(x);
  }
  const Buffer g = random_gates({c.B, c.T, c.HV}, rng, -1.f, 0.f);
  const Buffer cu = c.cu.empty() ? Buffer() : cu_buffer(c.cu);
  auto opt = [](const Buffer& b) { return b.empty() ? TensorView{} : b.view(); };
  ExecOptions co;
  co.backend = Backend::kCPU;
  Buffer gc(DType::kFloat32, {c.B, c.T, c.HV});
  ASSERT_TRUE(gdn_chunk_cumsum({g.view(), opt(cu), gc.view()}, co).ok());
  Buffer ref(c.dt, tokV);
  {
    const Status s = gdn_chunk_output({q.view(), k.view(), vn.view(), h.view(), gc.view(), opt(cu), ref.view()}, co);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  const Buffer dq = dev(q), dk = dev(k), dvn = dev(vn), dh = dev(h), dgc = dev(gc);
  const Buffer dcu = cu.empty() ? Buffer() : dev(cu);

  const NamedKernels kernels[] = {{"default kernel", {}}, {"mma.sync", mma_sync_kernels()}};
  for (const auto& [name, choice] : kernels) {
    SCOPED_TRACE(name);
    Buffer o = poisoned(c.dt, tokV);
    const Status s = chunk_output_with(
        {dq.view(), dk.view(), dvn.view(), dh.view(), dgc.view(), opt(dcu), o.view()}, choice);
    ASSERT_TRUE(s.ok()) << s.message();
    testkit::cuda_synchronize();
    if (c.rows() == c.B * c.T) {
      expect_close(o, ref, "o");
      continue;
    }
    const std::vector<float> og = o.to_float(), orf = ref.to_float();
    const size_t in = static_cast<size_t>(c.rows() * c.HV * kD);
    const auto e = testkit::compare(std::vector<float>(og.begin(), og.begin() + in),
                                    std::vector<float>(orf.begin(), orf.begin() + in));
    std::printf("    %-12s %s\n", "o", e.str().c_str());
    EXPECT_TRUE(testkit::within(e, testkit::kGdn)) << e.str();
    EXPECT_EQ(e.nan_count, 0) << "o has unwritten (NaN) elements";
    size_t written = 0;
    for (size_t i = in; i < og.size(); ++i) written += !std::isnan(og[i]);
    EXPECT_EQ(written, 0u) << "rows past the last sequence were written";
  }
}

TEST(GdnOutputCuda, ManyStagesPerCtaTwoValueHeadsPerQkHead) {
  // 2 x 65 chunks (the last of each 4 rows long) x 8 value heads = 1040 stages.
  run_output({2, 4100, 4, 8, {}}, 41);
}
TEST(GdnOutputCuda, RaggedThreeValueHeadsPerQkHead) {
  // lengths 37, 0, 263, 1, 179, 2510, then 10 rows in no sequence
  run_output({1, 3000, 2, 6, {0, 37, 37, 300, 301, 480, 2990}}, 42);
}
TEST(GdnOutputCuda, OneValueHeadPerQkHead) {
  run_output({1, 777, 3, 3, {}}, 43);
}
TEST(GdnOutputCuda, RaggedOneValueHeadPerQkHead) {
  run_output({1, 700, 2, 2, {0, 63, 64, 65, 129, 600}}, 44);
}
TEST(GdnOutputCuda, Fp16QueriesAndKeys) {
  // bf16 h and v_new with fp16 q/k: the mma.sync kernel on every GPU (WGMMA takes one dtype).
  OutCase c{1, 200, 2, 4, {}};
  c.dt = DType::kFloat16;
  run_output(c, 45);
}

}  // namespace
}  // namespace attnkit::gdn_test
