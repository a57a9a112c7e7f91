// The decode kernel's in-kernel split merge (decode_merge.cuh): the last split CTA of each
// (sequence, KV head) merges the partials. Split counts 1/3/16/128 agree with one split and are
// bit-identical across runs; a workspace full of garbage (it is scratch between calls, so the
// arrival counters in it may hold anything) still merges correctly, call after call; a captured
// plan replays bit-identically; and the merge's thread mapping holds for every row count.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <vector>

#include "gpu_attention_util.h"

namespace attnkit::test {
namespace {

TEST(PortableDecodeMerge, SplitCountsMatchOneSplitAndRerunBitIdentical) {
  uint64_t seed = 3000;
  for (KvKind kv : {KvKind::kContiguous, KvKind::kPaged})
    for (int sq : {1, 4}) {
      AttnCase c = gqa_decode_case(2, sq, 1, ++seed);
      // 2100 keys: 66 blocks of 32, so 128 splits leave many splits empty; the second sequence
      // is short enough that most of its splits are empty at 16 splits already.
      c.seqlens_k = {2100, 97};
      c.kv = kv == KvKind::kContiguous ? KvKind::kSeqused : kv;
      c.page_size = 16;
      c.sinks = true;
      c.qk_scale = 3.f;  // large logits: the merge's max subtraction matters
      if (sq == 4) c.mask = Mask::causal();
      std::vector<float> one;
      for (int splits : {1, 3, 16, 128}) {
        c.num_splits = splits;
        SCOPED_TRACE(c.str());
        GpuRun r = run_on_gpu(c);
        ASSERT_EQ(r.plan.num_splits, splits);
        EXPECT_EQ(r.plan.kernel.find("+split_merge") != std::string::npos, splits > 1)
            << r.plan.kernel;
        expect_gpu_matches(r);
        const std::vector<float> o = read_back(r.dev.o);
        if (splits == 1)
          one = o;
        else
          EXPECT_TRUE(close_to(o, one, gpu_o_tolerance(c.dtype), "O vs 1 split"));
        expect_rerun_bit_identical(r, portable_opts());
      }
    }
}

// The caller's workspace is scratch: fill it with garbage before every call; the arrival counters
// in it must still be zeroed by the call itself (or no split would find itself last, and the
// poisoned O would survive).
TEST(PortableDecodeMerge, GarbageWorkspaceEveryCall) {
  AttnCase c = gqa_decode_case(3, 2, 3000, 3100);
  c.kv = KvKind::kPaged;
  c.page_size = 64;
  c.num_splits = 9;
  AttnData host = make_attn_data(c);
  AttnData dev = host.to(cuda());
  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  ASSERT_TRUE(attention_forward(host.args(), cpu).ok());
  ExecOptions opts = portable_opts();
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(dev.args(), opts, &plan).ok());
  ASSERT_EQ(plan.num_splits, 9);
  ASSERT_GT(plan.workspace_bytes, 0u);
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, plan.workspace_bytes));
  opts.workspace = ws;
  opts.workspace_bytes = plan.workspace_bytes;
  std::vector<unsigned char> o_first;
  // Every 32-bit word of the workspace set to: all ones, the count that would make the first
  // split to arrive think it is the last (9 - 1), and a mixed pattern.
  const unsigned pattern[] = {0xffffffffu, 8u, 0xa5a5a5a5u};
  for (int call = 0; call < 3; ++call) {
    const std::vector<unsigned> words(plan.workspace_bytes / 4, pattern[call]);
    CUDA_OK(cudaMemcpy(ws, words.data(), words.size() * 4, cudaMemcpyHostToDevice));
    dev.poison_outputs();
    const Status st = attention_forward(dev.args(), opts, &plan);
    ASSERT_TRUE(st.ok()) << st.message();
    testkit::cuda_synchronize();
    EXPECT_TRUE(close_to(read_back(dev.o), read_view(host.o.view), testkit::kAttnBf16, "O"))
        << "call " << call;
    EXPECT_TRUE(close_to(read_back(dev.lse), read_view(host.lse.view), kGpuLse, "LSE"))
        << "call " << call;
    if (call == 0)
      o_first = bytes_of(dev.o);
    else
      EXPECT_EQ(o_first, bytes_of(dev.o)) << "call " << call;
  }
  CUDA_OK(cudaFree(ws));
}

// A planned split decode captured into a CUDA graph (workspace allocated inside the capture);
// replayed twice on the same inputs it gives bit-identical O and LSE, matching the reference.
TEST(PortableDecodeMerge, GraphReplaysBitIdentical) {
  AttnCase c = gqa_decode_case(1, 1, 8192, 3200);
  c.kv = KvKind::kPaged;
  c.page_size = 16;
  AttnData host = make_attn_data(c);
  AttnData dev = host.to(cuda());
  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  ASSERT_TRUE(attention_forward(host.args(), cpu).ok());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const ExecOptions opts = portable_opts(stream);
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(dev.args(), opts, &plan).ok());
  EXPECT_GT(plan.num_splits, 1);
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status st = attention_forward(dev.args(), opts, &plan);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st.message();
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<unsigned char> o_first, l_first;
  for (int replay = 0; replay < 2; ++replay) {
    dev.poison_outputs();
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(close_to(read_back(dev.o), read_view(host.o.view), testkit::kAttnBf16, "O"))
        << "replay " << replay;
    EXPECT_TRUE(close_to(read_back(dev.lse), read_view(host.lse.view), kGpuLse, "LSE"))
        << "replay " << replay;
    if (replay == 0) {
      o_first = bytes_of(dev.o);
      l_first = bytes_of(dev.lse);
    } else {
      EXPECT_EQ(o_first, bytes_of(dev.o));
      EXPECT_EQ(l_first, bytes_of(dev.lse));
    }
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}


// The merge splits each (row, 4 columns) item over up to 32 threads when the rows are few (1 row:
// 8 threads per item, 4 rows: 2, 16 rows: 1) and loads at most 16 splits per thread at once:
// 37 and 128 splits over 1, 2, 4, 8 and 16 rows, a second sequence whose later splits see no key,
// sinks and large logits. Each must match the reference and one split, and rerun bit-identically.
TEST(PortableDecodeMerge, ThreadsPerItemAndLoadRounds) {
  const struct {
    int hq, hkv, sq;
  } shapes[] = {{8, 8, 1}, {8, 4, 1}, {32, 8, 1}, {16, 2, 1}, {32, 8, 4}};
  uint64_t seed = 3300;
  for (const auto& sh : shapes) {
    AttnCase c = gqa_case(2, sh.sq, 1, ++seed, sh.hq, sh.hkv);
    c.seqlens_k = {4500, 300};
    c.kv = KvKind::kSeqused;
    c.sinks = true;
    c.qk_scale = 3.f;
    if (sh.sq > 1) c.mask = Mask::causal();
    std::vector<float> one;
    for (int splits : {1, 37, 128}) {
      c.num_splits = splits;
      SCOPED_TRACE(c.str());
      GpuRun r = run_on_gpu(c);
      ASSERT_EQ(r.plan.num_splits, splits);
      expect_gpu_matches(r);
      const std::vector<float> o = read_back(r.dev.o);
      if (splits == 1)
        one = o;
      else
        EXPECT_TRUE(close_to(o, one, gpu_o_tolerance(c.dtype), "O vs 1 split"));
      if (splits > 1) expect_rerun_bit_identical(r, portable_opts());
    }
  }
}

}  // namespace
}  // namespace attnkit::test
