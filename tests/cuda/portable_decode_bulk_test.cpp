// The portable decode kernel's bulk-copy twin (KvBulk, decode_kernel.cuh; sm_90 only): a plan
// naming "+bulk" runs it. On the same inputs it must give the threads' copies' results bit for bit
// (same tile, same arithmetic; only how K / V reach shared memory differs) and match the
// reference: every head dim, 16 and 32 rows, contiguous, ragged and paged KV (pages of 1, 16, 48
// and 64 keys), key counts that end mid-stage and mid-page, an empty sequence, splits, masks and
// score mods, with NaN in every cache slot no key uses (a bulk copy past a sequence's end would
// bring it in). Plans the twin cannot serve are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_attention_util.h"
#include "sm90_test_util.h"

namespace attnkit::test {
namespace {

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// The planner's choice rewritten to the bulk-copy twin (which has no L2-streaming form).
AttentionPlan bulk_plan(AttentionPlan plan) {
  if (const auto at = plan.kernel.find("+l2stream"); at != std::string::npos)
    plan.kernel.erase(at, 9);
  if (!has(plan.kernel, "+bulk")) plan.kernel += "+bulk";
  return plan;
}

void poison_unused(AttnData& d) {
  if (d.c.kv == KvKind::kPaged)
    poison_unused_slots(d);
  else
    poison_unused_kv(d);
}

// Runs the case with the planner's plan (threads' copies), then with its bulk twin on the same
// inputs: both match the reference and each other bit for bit.
void check_bulk(const AttnCase& c) {
  SCOPED_TRACE(c.str());
  GpuRun r = run_on_gpu(c, portable_opts(), poison_unused);
  ASSERT_TRUE(has(r.plan.kernel, "_decode")) << r.plan.kernel;
  ASSERT_FALSE(has(r.plan.kernel, "+bulk")) << r.plan.kernel;
  expect_gpu_matches(r);
  const auto o_threads = bytes_of(r.dev.o), lse_threads = bytes_of(r.dev.lse);
  r.plan = bulk_plan(r.plan);
  r.dev.poison_outputs();
  const Status st = attention_forward(r.dev.args(), portable_opts(), &r.plan);
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();
  expect_gpu_matches(r);
  EXPECT_EQ(bytes_of(r.dev.o), o_threads) << "O: bulk vs threads' copies, " << r.plan.kernel;
  EXPECT_EQ(bytes_of(r.dev.lse), lse_threads) << "LSE: bulk vs threads' copies, " << r.plan.kernel;
}

struct KvShape {
  KvKind kind;
  int page_size;
};
constexpr KvShape kKvShapes[] = {{KvKind::kSeqused, 0}, {KvKind::kRagged, 0},
                                 {KvKind::kPaged, 1},   {KvKind::kPaged, 16},
                                 {KvKind::kPaged, 48},  {KvKind::kPaged, 64}};

TEST(PortableDecodeBulk, EveryHeadDimAndKvLayout) {
  SKIP_UNLESS_HOPPER();
  const struct {
    int dqk, dv;
  } dims[] = {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {192, 192}, {256, 256}};
  uint64_t seed = 7000;
  for (const auto& d : dims)
    for (const KvShape& kv : kKvShapes)
      for (int sq : {1, 8}) {  // group 4: 4 and 32 rows
        AttnCase c = gqa_decode_case(3, sq, 1, ++seed);
        c.seqlens_k = {1000, 0, 2113};
        c.kv = kv.kind;
        c.page_size = kv.page_size;
        c.dqk = d.dqk;
        c.dv = d.dv;
        c.dtype = seed % 2 ? DType::kFloat16 : DType::kBFloat16;
        c.num_splits = seed % 3 == 0 ? 3 : 1;
        check_bulk(c);
      }
}

// Head dim 128 (the 8-warp, 64-key tile for plain calls): splits 1, 3, 16 and the planner's,
// sliding windows, softcap with ALiBi, sinks and LSE, and keys shorter than one stage.
TEST(PortableDecodeBulk, SplitsMasksAndScoreMods) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 7100;
  for (const KvShape& kv : kKvShapes)
    for (int splits : {1, 3, 16, 0})
      for (int opt = 0; opt < 3; ++opt) {
        AttnCase c = gqa_decode_case(3, 1, 1, ++seed);
        c.seqlens_k = {37, 4000, 1501};
        c.kv = kv.kind;
        c.page_size = kv.page_size;
        c.num_splits = splits;
        c.sinks = true;
        c.lse = true;
        if (opt == 1) c.mask = Mask::sliding_window(300, 0);
        if (opt == 2) {
          c.softcap = 30.f;
          c.alibi = true;
        }
        check_bulk(c);
      }
}

// Small cases of both tiles (8 and 4 warps) over each KV layout, for the sanitizers.
TEST(PortableDecodeBulk, SmallCases) {
  SKIP_UNLESS_HOPPER();
  uint64_t seed = 7300;
  for (const KvShape& kv : kKvShapes)
    for (bool window : {false, true}) {
      AttnCase c = gqa_decode_case(2, 1, 1, ++seed);
      c.seqlens_k = {70, 129};
      c.kv = kv.kind;
      c.page_size = kv.page_size;
      c.num_splits = window ? 2 : 1;
      if (window) c.mask = Mask::sliding_window(50, 0);
      check_bulk(c);
    }
}

// A plan that names the twin where there is none is refused: with L2 streaming, and on a prefill
// variant.
TEST(PortableDecodeBulk, PlansWithoutATwinAreRefused) {
  SKIP_UNLESS_HOPPER();
  AttnCase c = gqa_decode_case(2, 1, 3000, 7200);
  c.kv = KvKind::kPaged;
  c.page_size = 16;
  GpuRun r = run_on_gpu(c);
  ASSERT_TRUE(has(r.plan.kernel, "+l2stream")) << r.plan.kernel;
  AttentionPlan both = r.plan;
  both.kernel += "+bulk";
  Status st = attention_forward(r.dev.args(), portable_opts(), &both);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_TRUE(has(st.message(), "bulk")) << st.message();

  AttnCase pre = gqa_case(1, 256, 512, 7201);
  GpuRun rp = run_on_gpu(pre);
  ASSERT_FALSE(has(rp.plan.kernel, "_decode")) << rp.plan.kernel;
  AttentionPlan prefill = rp.plan;
  prefill.kernel += "+bulk";
  st = attention_forward(rp.dev.args(), portable_opts(), &prefill);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
}

}  // namespace
}  // namespace attnkit::test
