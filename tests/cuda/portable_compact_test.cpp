// The portable prefill tiles for devices that grant a block at most 99 KB of shared memory (sm_86,
// sm_89, sm_120): planned here as for such a device (the dispatcher's device facts with the limit
// lowered), then run on this GPU, against the CPU reference. Every variant whose regular tile
// needs more (d128 without softcap / ALiBi, 192/128, d256) must plan its compact tile, with the
// "+smem99k" suffix, and a variant that fits already must not.
#include <gtest/gtest.h>

#include "api/attention_problem.h"
#include "api/backends.h"
#include "gpu_attention_util.h"

namespace attnkit::test {
namespace {

constexpr int kSm89SmemPerBlock = 99 * 1024;  // cudaDevAttrMaxSharedMemoryPerBlockOptin there

// The plan a 99 KB device would get for `d`'s arguments.
Status plan_for_99k_device(const AttnData& d, AttentionPlan* plan) {
  detail::AttnProblem prob;
  ATTNKIT_RETURN_IF_ERROR(detail::validate_attention(d.args(), portable_opts(), &prob));
  detail::CudaDeviceInfo dev;
  ATTNKIT_RETURN_IF_ERROR(detail::cuda_device_info(prob.device.index, &dev));
  dev.smem_per_block_optin = kSm89SmemPerBlock;
  return detail::portable_attention_plan(d.args(), prob, dev, plan);
}

bool has_compact_suffix(const AttentionPlan& plan) {
  return plan.kernel.find("+smem99k") != std::string::npos;
}

// Runs `c` on the plan for a 99 KB device against the CPU reference; returns that plan.
AttentionPlan check_compact(AttnCase c, int num_splits) {
  c.num_splits = num_splits;
  SCOPED_TRACE(c.str());
  const GpuRun r = run_on_gpu(c, portable_opts(), nullptr, plan_for_99k_device);
  if (num_splits > 1) EXPECT_EQ(r.plan.num_splits, num_splits) << r.plan.kernel;
  expect_gpu_matches(r);
  return r.plan;
}

TEST(PortableCompact, LargeTilesGiveWay) {
  struct Dims {
    int dqk, dv;
  };
  uint64_t seed = 4100;
  for (Dims d : {Dims{128, 128}, Dims{192, 128}, Dims{256, 256}})
    for (int policy = 0; policy < 3; ++policy)
      for (int splits : {1, 3}) {
        AttnCase c = gqa_case(2, 77, 131, ++seed);
        c.dqk = d.dqk;
        c.dv = d.dv;
        c.lse = true;
        if (policy >= 1) c.mask = Mask::causal();
        if (policy == 2) c.softcap = 30.f;
        const AttentionPlan plan = check_compact(c, splits);
        // d128 with softcap runs 64-row tiles of 87 KB, which fit as they are.
        const bool regular_fits = d.dqk == 128 && policy == 2;
        EXPECT_EQ(has_compact_suffix(plan), !regular_fits) << plan.kernel;
      }
}

TEST(PortableCompact, Fp16PagedAndLong) {
  uint64_t seed = 4200;
  for (int dim : {128, 256}) {
    AttnCase c = gqa_case(2, 300, 700, ++seed, 8, 2);
    c.dtype = DType::kFloat16;
    c.dqk = c.dv = dim;
    c.kv = KvKind::kPaged;
    c.page_size = 16;
    c.seqlens_k = {700, 333};
    c.mask = Mask::sliding_window(200, 0);
    EXPECT_TRUE(has_compact_suffix(check_compact(c, 1)));
    c.mask = Mask{};
    c.seed = ++seed;
    EXPECT_TRUE(has_compact_suffix(check_compact(c, 1)));
  }
}

TEST(PortableCompact, SmallTilesUnchanged) {
  uint64_t seed = 4300;
  for (int dim : {64, 96}) {
    AttnCase c = gqa_case(1, 70, 90, ++seed);
    c.dqk = c.dv = dim;
    EXPECT_FALSE(has_compact_suffix(check_compact(c, 1)));
  }
}

}  // namespace
}  // namespace attnkit::test
