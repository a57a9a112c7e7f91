// Running a test case on the GPU and checking it against the CPU backend (the reference),
// computed from the same rounded inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attnkit/attention.h"
#include "common/attention_case.h"
#include "common/attention_check.h"
#include "testkit/buffer.h"

namespace attnkit::test {

inline testkit::Tolerance gpu_o_tolerance(DType dt) {
  return dt == DType::kFloat16 ? testkit::kAttnFp16 : testkit::kAttnBf16;
}
// docs/design.md: LSE within 1e-3 absolute. (The CPU-vs-fp64 bound, rel_l2 1e-6, is
// below fp32 exp/log rounding on the GPU; the relative bound here still catches any real error.)
inline constexpr testkit::Tolerance kGpuLse{1e-4, 1e-3};

inline ExecOptions portable_opts(void* stream = nullptr) {
  ExecOptions o;
  o.backend = Backend::kCudaPortable;
  o.stream = stream;
  return o;
}

struct GpuRun {
  AttnData host;  // inputs, and the CPU reference's outputs
  AttnData dev;   // the same inputs on the GPU, and the GPU outputs
  AttentionPlan plan;
};

// Makes the plan a GPU run uses (plan_attention's for the run's options when none is given).
using PlanMaker = std::function<Status(const AttnData& dev, AttentionPlan* plan)>;

// Builds the case, runs the CPU reference on the host copy and the portable kernels on a device
// copy (outputs poisoned in both), and checks that the GPU run succeeded. prepare_inputs, if set,
// edits the host inputs before the device copy is made (e.g. NaN in cache slots no key uses);
// make_plan, if set, plans instead of plan_attention.
inline GpuRun run_on_gpu(const AttnCase& c, ExecOptions opts = portable_opts(),
                         const std::function<void(AttnData&)>& prepare_inputs = nullptr,
                         const PlanMaker& make_plan = nullptr) {
  GpuRun r;
  r.host = make_attn_data(c);
  if (prepare_inputs) prepare_inputs(r.host);
  r.dev = r.host.to(cuda());
  r.dev.poison_outputs();
  ExecOptions cpu;
  cpu.backend = Backend::kCPU;
  const Status cs = attention_forward(r.host.args(), cpu);
  EXPECT_TRUE(cs.ok()) << "cpu reference: " << cs.message();
  const Status ps =
      make_plan ? make_plan(r.dev, &r.plan) : plan_attention(r.dev.args(), opts, &r.plan);
  EXPECT_TRUE(ps.ok()) << "plan: " << ps.message();
  if (!ps.ok()) return r;
  const Status st = attention_forward(r.dev.args(), opts, &r.plan);
  EXPECT_TRUE(st.ok()) << "gpu: " << st.message();
  testkit::cuda_synchronize();
  return r;
}

// GPU outputs vs the CPU reference; every logical element must have been written (poison is NaN).
inline void expect_gpu_matches(const GpuRun& r) {
  EXPECT_TRUE(close_to(read_back(r.dev.o), read_view(r.host.o.view), gpu_o_tolerance(r.host.c.dtype),
                       "O"))
      << r.host.c.str() << " kernel=" << r.plan.kernel;
  if (r.host.c.lse)
    EXPECT_TRUE(close_to(read_back(r.dev.lse), read_view(r.host.lse.view), kGpuLse, "LSE"))
        << r.host.c.str() << " kernel=" << r.plan.kernel;
}

inline void check_case(const AttnCase& c, ExecOptions opts = portable_opts()) {
  SCOPED_TRACE(c.str());
  GpuRun r = run_on_gpu(c, opts);
  EXPECT_EQ(r.plan.backend, Backend::kCudaPortable);
  EXPECT_EQ(r.plan.kernel.rfind("portable_fwd_", 0), 0u) << r.plan.kernel;
  expect_gpu_matches(r);
}

// Raw bytes of a device buffer, for bit-exact comparisons.
inline std::vector<unsigned char> bytes_of(const ViewedBuffer& vb) {
  const testkit::Buffer host = vb.buf.to(cpu());
  std::vector<unsigned char> out(host.bytes());
  std::memcpy(out.data(), host.data(), out.size());
  return out;
}

// bf16 (AttnCase's default), hq query heads over hkv KV heads, head dim 128.
inline AttnCase gqa_case(int batch, int sq, int sk, uint64_t seed, int hq = 4, int hkv = 2) {
  AttnCase c = AttnCase::uniform(batch, sq, sk);
  c.hq = hq;
  c.hkv = hkv;
  c.dqk = c.dv = 128;
  c.seed = seed;
  return c;
}

// The decode benchmark's heads: GQA 32/8 (Llama-3-8B), head dim 128, bf16.
inline AttnCase gqa_decode_case(int batch, int sq, int sk, uint64_t seed) {
  return gqa_case(batch, sq, sk, seed, 32, 8);
}

// Runs a planned case again on the same inputs (outputs poisoned first): O and LSE must come back
// bit-identical.
inline void expect_rerun_bit_identical(GpuRun& r, const ExecOptions& opts) {
  const auto o1 = bytes_of(r.dev.o), l1 = bytes_of(r.dev.lse);
  r.dev.poison_outputs();
  const Status st = attention_forward(r.dev.args(), opts, &r.plan);
  ASSERT_TRUE(st.ok()) << "rerun: " << st.message();
  testkit::cuda_synchronize();
  EXPECT_EQ(bytes_of(r.dev.o), o1) << "rerun O";
  EXPECT_EQ(bytes_of(r.dev.lse), l1) << "rerun LSE";
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

}  // namespace attnkit::test
