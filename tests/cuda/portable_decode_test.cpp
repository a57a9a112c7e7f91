// Portable CUDA attention, decode shapes: split-KV with the merge (split counts agree), paged
// caches, merge_states on the GPU, bit-identical reruns, a CUDA-graph capture of a planned
// decode that replays correctly on new inputs, and the planner's choice of the decode tile.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <string>

#include "gpu_attention_util.h"

namespace attnkit::test {
namespace {

TEST(PortableDecode, SplitCountsAgree) {
  uint64_t seed = 1000;
  for (KvKind kv : {KvKind::kContiguous, KvKind::kPaged})
    for (int sq : {1, 4}) {
      AttnCase c = gqa_decode_case(2, sq, 1500, ++seed);
      c.kv = kv;
      c.page_size = 64;
      c.sinks = sq == 4;
      if (sq == 4) c.mask = Mask::causal();
      std::vector<float> first;
      for (int splits : {1, 3, 16, 0}) {
        c.num_splits = splits;
        SCOPED_TRACE(c.str());
        GpuRun r = run_on_gpu(c);
        if (splits > 0) EXPECT_EQ(r.plan.num_splits, splits);
        if (r.plan.num_splits > 1) EXPECT_GT(r.plan.workspace_bytes, 0u);
        expect_gpu_matches(r);
        const std::vector<float> o = read_back(r.dev.o);
        if (first.empty()) {
          first = o;
        } else {
          EXPECT_TRUE(close_to(o, first, gpu_o_tolerance(c.dtype), "O vs 1 split"));
        }
      }
    }
}

TEST(PortableDecode, FeatureMatrix) {
  uint64_t seed = 1100;
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (int ps : {1, 16, 64})
      for (int sq : {1, 2, 8}) {
        AttnCase c = gqa_decode_case(3, sq, 1, ++seed);
        c.dtype = dt;
        c.kv = KvKind::kPaged;
        c.page_size = ps;
        c.seqlens_k = {1013, 1, 300};
        c.mask = Mask::causal();
        c.num_splits = 5;
        check_case(c);
      }
  for (int variant = 0; variant < 5; ++variant) {
    AttnCase c = gqa_decode_case(2, 1, 777, ++seed);
    switch (variant) {
      case 0: c.softcap = 30.f; break;
      case 1: c.alibi = true; break;
      case 2: c.sinks = true; c.mask = Mask::sliding_window(100, 0); break;
      case 3: c.dqk = 192; c.dv = 128; c.hq = 8; c.hkv = 1; break;
      case 4: c.dqk = c.dv = 256; c.hq = 7; c.hkv = 7; c.kv = KvKind::kSeqused;
              c.seqlens_k = {777, 0}; break;
    }
    c.num_splits = 4;
    check_case(c);
    c.num_splits = 0;
    c.seed = ++seed;
    check_case(c);
  }
}

TEST(PortableDecode, MergeStatesOnGpu) {
  std::mt19937_64 rng(1200);
  const int n = 5, t = 37, h = 3, d = 96;
  for (DType in_dt : {DType::kFloat32, DType::kBFloat16})
    for (DType out_dt : {DType::kFloat32, DType::kFloat16}) {
      testkit::Buffer parts(in_dt, {n, t, h, d}), lse(DType::kFloat32, {n, t, h});
      testkit::fill_normal(parts, rng);
      std::vector<float> l(n * t * h);
      std::normal_distribution<float> nd(0.f, 3.f);
      for (size_t i = 0; i < l.size(); ++i) l[i] = nd(rng);
      for (int i = 0; i < t * h; i += 4) l[i] = -INFINITY;                 // one empty state
      for (int ni = 0; ni < n; ++ni) l[ni * t * h + 7] = -INFINITY;        // an all-empty row
      lse.from_float(l);
      testkit::Buffer o_ref(out_dt, {t, h, d}), lse_ref(DType::kFloat32, {t, h});
      o_ref.poison();
      lse_ref.poison();
      MergeStatesArgs ha{parts.view(), lse.view(), o_ref.view(), lse_ref.view()};
      ASSERT_TRUE(merge_states(ha).ok());

      testkit::Buffer dparts = parts.to(cuda()), dlse = lse.to(cuda());
      testkit::Buffer o_gpu(out_dt, {t, h, d}, cuda()), lse_gpu(DType::kFloat32, {t, h}, cuda());
      o_gpu.poison();
      lse_gpu.poison();
      MergeStatesArgs da{dparts.view(), dlse.view(), o_gpu.view(), lse_gpu.view()};
      const Status st = merge_states(da);
      ASSERT_TRUE(st.ok()) << st.message();
      testkit::cuda_synchronize();
      const testkit::Tolerance tol =
          out_dt == DType::kFloat32 ? testkit::Tolerance{1e-5, 1e-4} : testkit::kAttnFp16;
      EXPECT_TRUE(close_to(o_gpu.to_float(), o_ref.to_float(), tol, "merged O"));
      EXPECT_TRUE(close_to(lse_gpu.to_float(), lse_ref.to_float(), kGpuLse, "merged LSE"));
    }
}

TEST(PortableDecode, BitIdenticalReruns) {
  for (int splits : {1, 7}) {
    AttnCase c = gqa_decode_case(2, 3, 2000, 1300 + splits);
    c.kv = KvKind::kPaged;
    c.page_size = 16;
    c.num_splits = splits;
    SCOPED_TRACE("splits " + std::to_string(splits));
    GpuRun r = run_on_gpu(c);
    expect_rerun_bit_identical(r, portable_opts());
  }
  AttnCase c = AttnCase::uniform(2, 300, 400);  // prefill too
  c.hq = 4;
  c.hkv = 2;
  c.mask = Mask::causal();
  c.seed = 1310;
  GpuRun r = run_on_gpu(c);
  const auto o1 = bytes_of(r.dev.o);
  r.dev.poison_outputs();
  ASSERT_TRUE(attention_forward(r.dev.args(), portable_opts(), &r.plan).ok());
  testkit::cuda_synchronize();
  EXPECT_EQ(o1, bytes_of(r.dev.o));
}

// A planned split-KV decode (workspace allocated stream-ordered inside the capture) recorded into
// a CUDA graph; each replay over fresh inputs matches the CPU reference.
TEST(PortableDecode, GraphCaptureReplays) {
  AttnCase c = gqa_decode_case(1, 1, 4000, 1400);
  c.kv = KvKind::kPaged;
  c.page_size = 16;
  c.num_splits = 0;
  AttnData host = make_attn_data(c);
  AttnData dev = host.to(cuda());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const ExecOptions opts = portable_opts(stream);
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(dev.args(), opts, &plan).ok());
  EXPECT_GT(plan.num_splits, 1) << "batch 1 should be split across the GPU";

  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status st = attention_forward(dev.args(), opts, &plan);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st.message();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  std::mt19937_64 rng(1401);
  for (int replay = 0; replay < 2; ++replay) {
    // New inputs in the same buffers, as a decode loop would have.
    testkit::fill_normal(host.q.buf, rng);
    testkit::fill_normal(host.k.buf, rng);
    testkit::fill_normal(host.v.buf, rng);
    for (auto [src, dst] : {std::pair{&host.q, &dev.q}, {&host.k, &dev.k}, {&host.v, &dev.v}})
      CUDA_OK(cudaMemcpy(dst->buf.data(), src->buf.data(), src->buf.bytes(), cudaMemcpyHostToDevice));
    dev.poison_outputs();
    ASSERT_TRUE(attention_forward(host.args(), cpu).ok());
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(close_to(read_back(dev.o), read_view(host.o.view), testkit::kAttnBf16, "O"))
        << "replay " << replay;
    EXPECT_TRUE(close_to(read_back(dev.lse), read_view(host.lse.view), kGpuLse, "LSE"))
        << "replay " << replay;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(PortableDecode, PlannerSplitsSmallBatches) {
  AttnCase c = gqa_decode_case(1, 1, 8192, 1500);
  c.kv = KvKind::kPaged;
  c.page_size = 64;
  AttnData dev = make_attn_data(c).to(cuda());
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(dev.args(), portable_opts(), &plan).ok());
  EXPECT_GT(plan.num_splits, 1);
  EXPECT_NE(plan.kernel.find("+split_merge"), std::string::npos) << plan.kernel;
  // 8 KV heads: one wave of two CTAs per SM, then the fewest splits with the same longest one,
  // in the planner's 32-key blocks of the keys the page table spans (the test data's table has a
  // spare page: 8256 keys here, so 33 splits on 132 SMs; 8192 contiguous keys plan 32).
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t keys = dev.page_table.view.size(1) * c.page_size;
  const int64_t wave = std::min(2 * sms / 8, 128), blocks = (keys + 31) / 32;
  const int64_t per = (blocks + wave - 1) / wave;
  EXPECT_EQ(plan.num_splits, (blocks + per - 1) / per);
  EXPECT_LE(plan.num_splits, wave);
  AttnCase big = gqa_decode_case(64, 1, 256, 1501);  // 512 CTAs already fill the GPU
  AttnData dev2 = make_attn_data(big).to(cuda());
  ASSERT_TRUE(plan_attention(dev2.args(), portable_opts(), &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
}

// Decode (query tokens x GQA group within 32 rows) runs on the decode kernel, one CTA per KV head
// holding all rows; longer query blocks keep the prefill tiles.
TEST(PortableDecode, PlannerPicksDecodeTile) {
  const struct {
    int sq;
    bool decode;
  } cases[] = {{1, true}, {8, true}, {9, false}, {64, false}};
  uint64_t seed = 1600;
  for (const auto& k : cases) {
    AttnCase c = gqa_decode_case(2, k.sq, 512, ++seed);  // group 4: rows = 4 * sq
    AttnData dev = make_attn_data(c).to(cuda());
    AttentionPlan plan;
    ASSERT_TRUE(plan_attention(dev.args(), portable_opts(), &plan).ok()) << "sq " << k.sq;
    EXPECT_EQ(plan.kernel.find("_decode") != std::string::npos, k.decode)
        << "sq " << k.sq << ": " << plan.kernel;
    EXPECT_EQ(plan.kernel.find("_prefill") != std::string::npos, !k.decode)
        << "sq " << k.sq << ": " << plan.kernel;
  }
}

}  // namespace
}  // namespace attnkit::test
