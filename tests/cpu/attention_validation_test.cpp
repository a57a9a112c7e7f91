// Argument validation of attention_forward / plan_attention / merge_states: one test per error,
// each asserting the status code, that the message names the argument, and that the outputs still
// hold their poison (nothing is written when validation fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_attention_util.h"

namespace attnkit::test {
namespace {

bool all_poisoned(const testkit::Buffer& b) {
  const auto* p = static_cast<const uint8_t*>(b.data());
  for (size_t i = 0; i < b.bytes(); ++i)
    if (p[i] != 0xFF) return false;
  return true;
}

// Runs plan_attention and attention_forward on `a` (views into d's buffers); both must fail with
// `code` and a message containing `needle`, and d's outputs must be untouched.
void expect_rejected(AttnData& d, const AttentionArgs& a, StatusCode code, const std::string& needle,
                     ExecOptions opts = cpu_opts()) {
  d.poison_outputs();
  AttentionPlan plan;
  const Status ps = plan_attention(a, opts, &plan);
  EXPECT_EQ(ps.code(), code) << ps.message();
  EXPECT_NE(ps.message().find(needle), std::string::npos) << "message: " << ps.message();
  const Status st = attention_forward(a, opts);
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message();
  EXPECT_TRUE(all_poisoned(d.o.buf)) << "o was written";
  if (d.lse.defined()) EXPECT_TRUE(all_poisoned(d.lse.buf)) << "lse was written";
}

constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;

AttnCase base_case() {
  AttnCase c = AttnCase::uniform(2, 8, 8);
  c.hq = 4;
  c.hkv = 2;
  c.alibi = true;
  c.sinks = true;
  return c;
}

AttnCase ragged_case() {
  AttnCase c = base_case();
  c.ragged_q = true;
  c.kv = KvKind::kRagged;
  c.seqlens_q = {5, 3};
  c.seqlens_k = {6, 9};
  return c;
}

AttnCase paged_case() {
  AttnCase c = base_case();
  c.kv = KvKind::kPaged;
  c.page_size = 4;
  c.seqlens_k = {6, 9};
  return c;
}

TEST(AttentionValidation, BaseCasesAreValid) {
  for (const AttnCase& c : {base_case(), ragged_case(), paged_case()}) {
    AttnData d = make_attn_data(c);
    const Status st = attention_forward(d.args(), cpu_opts());
    EXPECT_TRUE(st.ok()) << st.message();
  }
}

// A plan is checked against the call it runs: one made for a CUDA backend never runs on host
// tensors (nor a CPU plan on device tensors), and ExecOptions::backend must agree with it.
TEST(AttentionValidation, PlanForAnotherBackendIsRefused) {
  AttnData d = make_attn_data(base_case());
  AttentionPlan plan;
  ASSERT_TRUE(plan_attention(d.args(), cpu_opts(), &plan).ok());
  for (Backend b : {Backend::kCudaPortable, Backend::kCudaSm90}) {
    AttentionPlan other = plan;
    other.backend = b;
    d.poison_outputs();
    const Status st = attention_forward(d.args(), cpu_opts(), &other);
    EXPECT_EQ(st.code(), kInvalid) << st.message();
    EXPECT_NE(st.message().find("plan is for the"), std::string::npos) << st.message();
    EXPECT_TRUE(all_poisoned(d.o.buf)) << "o was written";
  }
  ExecOptions forced = cpu_opts();
  forced.backend = Backend::kCudaSm90;
  const Status st = attention_forward(d.args(), forced, &plan);
  EXPECT_EQ(st.code(), kInvalid) << st.message();
  EXPECT_NE(st.message().find("ExecOptions::backend"), std::string::npos) << st.message();
  EXPECT_TRUE(attention_forward(d.args(), cpu_opts(), &plan).ok());
}

TEST(AttentionValidation, MisalignedPointer) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.q.data = static_cast<char*>(a.q.data) + 1;
  expect_rejected(d, a, kInvalid, "q is not aligned to its element size");
}

TEST(AttentionValidation, MissingOutput) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.o = TensorView{};
  expect_rejected(d, a, kInvalid, "o is required");
}

TEST(AttentionValidation, KBatchDisagreesWithQ) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.k.shape[0] = 1;
  a.v.shape[0] = 1;
  expect_rejected(d, a, kInvalid, "k has batch 1");
}

TEST(AttentionValidation, VShapeDisagreesWithK) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.v.shape[1] = 4;
  expect_rejected(d, a, kInvalid, "v has shape");
}

TEST(AttentionValidation, KHeadDimDisagreesWithQ) {
  AttnCase c = base_case();
  c.dqk = 128;
  AttnData d = make_attn_data(c);
  AttentionArgs a = d.args();
  a.k.shape[3] = 64;
  expect_rejected(d, a, kInvalid, "k head dim");
}

TEST(AttentionValidation, OShapeWrong) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.o.shape[2] = 3;
  expect_rejected(d, a, kInvalid, "o has shape");
}

TEST(AttentionValidation, LseShapeWrong) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.lse.shape[1] = 4;
  expect_rejected(d, a, kInvalid, "lse has shape");
}

TEST(AttentionValidation, LseDtypeWrong) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.lse.dtype = DType::kBFloat16;
  expect_rejected(d, a, kInvalid, "lse has dtype");
}

TEST(AttentionValidation, QRankWrong) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.q = make_view(a.q.data, a.q.dtype, {16, 4, 64});  // ragged-shaped q without cu_seqlens_q
  expect_rejected(d, a, kInvalid, "q must have 4 dimensions");
}

TEST(AttentionValidation, Int32Q) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.q.dtype = DType::kInt32;
  expect_rejected(d, a, kInvalid, "q has dtype int32");
}

TEST(AttentionValidation, MixedDtypes) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.k.dtype = DType::kFloat16;
  expect_rejected(d, a, kInvalid, "k has dtype fp16");
  a = d.args();
  a.o.dtype = DType::kFloat16;
  expect_rejected(d, a, kInvalid, "o has dtype fp16");
}

TEST(AttentionValidation, UnsupportedHeadDim) {
  AttnCase c = base_case();
  c.dqk = c.dv = 80;
  AttnData d = make_attn_data(c);
  expect_rejected(d, d.args(), StatusCode::kUnsupported, "head dim 80 of q/k");
  AttnCase cv = base_case();
  cv.dv = 80;
  AttnData dv = make_attn_data(cv);
  expect_rejected(dv, dv.args(), StatusCode::kUnsupported, "head dim 80 of v");
}

TEST(AttentionValidation, LastDimNotContiguous) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.q.stride[3] = 2;
  expect_rejected(d, a, kInvalid, "q must be contiguous in its last dimension");
  a = d.args();
  a.o.stride[3] = 2;
  expect_rejected(d, a, kInvalid, "o must be contiguous in its last dimension");
}

TEST(AttentionValidation, NegativeStride) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.k.stride[1] = -a.k.stride[1];
  expect_rejected(d, a, kInvalid, "k has a negative stride");
  a = d.args();
  a.lse.stride[0] = -1;
  expect_rejected(d, a, kInvalid, "lse has a negative stride");
}

TEST(AttentionValidation, HqNotMultipleOfHkv) {
  AttnCase c = base_case();
  c.hq = 4;
  c.hkv = 3;
  AttnData d = make_attn_data(c);
  expect_rejected(d, d.args(), kInvalid, "q heads (4) must be a multiple of k/v heads (3)");
}

// Writes `vals` into an int32 index buffer of the case.
void set_ints(ViewedBuffer& b, const std::vector<int32_t>& vals) { b.buf.from_int(vals); }

TEST(AttentionValidation, CuSeqlensQNotStartingAtZero) {
  AttnData d = make_attn_data(ragged_case());
  set_ints(d.cu_q, {1, 5, 8});
  expect_rejected(d, d.args(), kInvalid, "cu_seqlens_q[0] must be 0");
}

TEST(AttentionValidation, CuSeqlensQDecreasing) {
  AttnData d = make_attn_data(ragged_case());
  set_ints(d.cu_q, {0, 6, 5});
  expect_rejected(d, d.args(), kInvalid, "cu_seqlens_q must be non-decreasing");
}

TEST(AttentionValidation, CuSeqlensQPastTensor) {
  AttnData d = make_attn_data(ragged_case());
  set_ints(d.cu_q, {0, 5, 9});  // q has 8 rows
  expect_rejected(d, d.args(), kInvalid, "cu_seqlens_q ends at 9");
}

TEST(AttentionValidation, CuSeqlensKInvalid) {
  AttnData d = make_attn_data(ragged_case());
  set_ints(d.cu_k, {0, 7, 6});
  expect_rejected(d, d.args(), kInvalid, "cu_seqlens_k must be non-decreasing");
  set_ints(d.cu_k, {0, 7, 1000});
  expect_rejected(d, d.args(), kInvalid, "cu_seqlens_k ends at 1000");
}

TEST(AttentionValidation, CuSeqlensWrongDtypeOrShape) {
  AttnData d = make_attn_data(ragged_case());
  AttentionArgs a = d.args();
  a.cu_seqlens_q.dtype = DType::kFloat32;
  expect_rejected(d, a, kInvalid, "cu_seqlens_q has dtype fp32");
  a = d.args();
  a.cu_seqlens_k.shape[0] = 2;  // B + 1 = 3
  expect_rejected(d, a, kInvalid, "cu_seqlens_k has shape");
}

TEST(AttentionValidation, PageTableEntryOutOfRange) {
  AttnData d = make_attn_data(paged_case());
  std::vector<int32_t> table = d.page_table.buf.to_int();
  const int64_t max_pages = d.page_table.view.shape[1];
  const int64_t num_pages = d.k.view.shape[0];
  table[1] = -1;  // sequence 0 uses 2 pages
  set_ints(d.page_table, table);
  expect_rejected(d, d.args(), kInvalid, "page_table[0, 1] = -1 is outside");
  table[1] = 0;
  table[max_pages + 2] = static_cast<int32_t>(num_pages);  // sequence 1 uses 3 pages
  set_ints(d.page_table, table);
  expect_rejected(d, d.args(), kInvalid,
                  "page_table[1, 2] = " + std::to_string(num_pages) + " is outside");
}

TEST(AttentionValidation, SequsedKOverCapacity) {
  AttnData d = make_attn_data(paged_case());
  const int64_t capacity = d.page_table.view.shape[1] * 4;
  set_ints(d.seqused_k, {6, static_cast<int32_t>(capacity + 1)});
  expect_rejected(d, d.args(), kInvalid, "seqused_k[1] = " + std::to_string(capacity + 1));

  AttnCase c = base_case();
  c.kv = KvKind::kSeqused;
  AttnData dc = make_attn_data(c);
  const int64_t sk = dc.k.view.shape[1];
  set_ints(dc.seqused_k, {static_cast<int32_t>(sk + 1), 2});
  expect_rejected(dc, dc.args(), kInvalid, "seqused_k[0] = " + std::to_string(sk + 1));
  set_ints(dc.seqused_k, {-1, 2});
  expect_rejected(dc, dc.args(), kInvalid, "seqused_k[0] = -1");
}

TEST(AttentionValidation, PageTableWithoutSequsedK) {
  AttnData d = make_attn_data(paged_case());
  AttentionArgs a = d.args();
  a.seqused_k = TensorView{};
  expect_rejected(d, a, kInvalid, "seqused_k is required with page_table");
}

TEST(AttentionValidation, PageTableAndCuSeqlensKTogether) {
  AttnData d = make_attn_data(paged_case());
  AttnData r = make_attn_data(ragged_case());
  AttentionArgs a = d.args();
  a.cu_seqlens_k = r.cu_k.view;
  expect_rejected(d, a, kInvalid, "either page_table (paged KV) or cu_seqlens_k");
}

TEST(AttentionValidation, SequsedKWithRaggedK) {
  AttnData d = make_attn_data(ragged_case());
  AttnData p = make_attn_data(paged_case());
  AttentionArgs a = d.args();
  a.seqused_k = p.seqused_k.view;
  expect_rejected(d, a, kInvalid, "seqused_k goes with contiguous or paged KV");
}

TEST(AttentionValidation, WindowBelowMinusOne) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.mask.window_left = -2;
  expect_rejected(d, a, kInvalid, "mask.window_left must be >= -1");
  a = d.args();
  a.mask.window_right = -5;
  expect_rejected(d, a, kInvalid, "mask.window_right must be >= -1");
}

TEST(AttentionValidation, NegativeChunkSize) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.mask.chunk_size = -4;
  expect_rejected(d, a, kInvalid, "mask.chunk_size");
}

TEST(AttentionValidation, NegativeNumSplits) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.num_splits = -1;
  expect_rejected(d, a, kInvalid, "num_splits");
}

TEST(AttentionValidation, BadSoftcap) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.softcap = -1.f;
  expect_rejected(d, a, kInvalid, "softcap");
  a.softcap = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(d, a, kInvalid, "softcap");
  a.softcap = std::numeric_limits<float>::infinity();
  expect_rejected(d, a, kInvalid, "softcap");
}

TEST(AttentionValidation, BadScale) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.scale = std::numeric_limits<float>::infinity();
  expect_rejected(d, a, kInvalid, "scale");
}

TEST(AttentionValidation, NegativeMaxSeqlen) {
  AttnData d = make_attn_data(ragged_case());
  AttentionArgs a = d.args();
  a.max_seqlen_k = -3;
  expect_rejected(d, a, kInvalid, "max_seqlen");
}

TEST(AttentionValidation, AlibiWrongShapeOrDtype) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.alibi_slopes.shape[0] = 3;
  expect_rejected(d, a, kInvalid, "alibi_slopes has shape");
  a = d.args();
  a.alibi_slopes.dtype = DType::kBFloat16;
  expect_rejected(d, a, kInvalid, "alibi_slopes has dtype bf16");
}

TEST(AttentionValidation, SinksWrongShapeOrDtype) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.sinks.ndim = 2;
  a.sinks.shape[1] = 1;
  a.sinks.stride[1] = 1;
  expect_rejected(d, a, kInvalid, "sinks has shape");
  a = d.args();
  a.sinks.dtype = DType::kInt32;
  expect_rejected(d, a, kInvalid, "sinks has dtype int32");
}

TEST(AttentionValidation, CudaBackendForHostTensors) {
  AttnData d = make_attn_data(base_case());
  for (Backend b : {Backend::kCudaPortable, Backend::kCudaSm90}) {
    ExecOptions o = cpu_opts();
    o.backend = b;
    expect_rejected(d, d.args(), kInvalid, std::string("backend ") + to_string(b), o);
  }
}

// Views that claim to be on a CUDA device: validation rejects them before touching their data.
TEST(AttentionValidation, TensorsOnDifferentDevices) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  a.k.device = cuda(0);
  expect_rejected(d, a, kInvalid, "k is on");
  a = d.args();
  a.sinks.device = cuda(0);
  expect_rejected(d, a, kInvalid, "sinks is on");
  a = d.args();
  a.lse.device = cuda(0);
  expect_rejected(d, a, kInvalid, "lse is on");
}

TEST(AttentionValidation, CpuBackendForDeviceTensors) {
  AttnData d = make_attn_data(base_case());
  AttentionArgs a = d.args();
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o, &a.lse, &a.alibi_slopes, &a.sinks}) t->device = cuda(0);
  expect_rejected(d, a, kInvalid, "backend cpu needs host tensors");
}

// ---- merge_states

struct MergeData {
  testkit::Buffer o_parts{DType::kFloat32, {3, 5, 2, 64}}, lse_parts{DType::kFloat32, {3, 5, 2}};
  testkit::Buffer o{DType::kBFloat16, {5, 2, 64}}, lse{DType::kFloat32, {5, 2}};
  MergeData() {
    std::mt19937_64 rng(3);
    testkit::fill_normal(o_parts, rng);
    testkit::fill_normal(lse_parts, rng);
  }
  MergeStatesArgs args() const { return {o_parts.view(), lse_parts.view(), o.view(), lse.view()}; }
};

void expect_merge_rejected(MergeData& m, const MergeStatesArgs& a, const std::string& needle,
                           ExecOptions opts = cpu_opts()) {
  m.o.poison();
  m.lse.poison();
  const Status st = merge_states(a, opts);
  EXPECT_EQ(st.code(), kInvalid) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message();
  EXPECT_TRUE(all_poisoned(m.o)) << "o was written";
  EXPECT_TRUE(all_poisoned(m.lse)) << "lse was written";
}

TEST(MergeStatesValidation, BaseIsValid) {
  MergeData m;
  EXPECT_TRUE(merge_states(m.args(), cpu_opts()).ok());
}

TEST(MergeStatesValidation, LsePartsShapeMismatch) {
  MergeData m;
  MergeStatesArgs a = m.args();
  a.lse_parts.shape[0] = 2;
  expect_merge_rejected(m, a, "lse_parts has shape");
}

TEST(MergeStatesValidation, OShapeMismatch) {
  MergeData m;
  MergeStatesArgs a = m.args();
  a.o.shape[2] = 32;
  expect_merge_rejected(m, a, "o has shape");
}

TEST(MergeStatesValidation, LseShapeMismatch) {
  MergeData m;
  MergeStatesArgs a = m.args();
  a.lse.shape[0] = 4;
  expect_merge_rejected(m, a, "lse has shape");
}

TEST(MergeStatesValidation, OPartsRankOrDtype) {
  MergeData m;
  MergeStatesArgs a = m.args();
  a.o_parts.ndim = 3;
  expect_merge_rejected(m, a, "o_parts must have 4 dimensions");
  a = m.args();
  a.lse_parts.dtype = DType::kBFloat16;
  expect_merge_rejected(m, a, "lse_parts has dtype");
  a = m.args();
  a.o_parts.dtype = DType::kInt32;
  expect_merge_rejected(m, a, "o_parts has dtype");
}

TEST(MergeStatesValidation, NoStates) {
  MergeData m;
  MergeStatesArgs a = m.args();
  a.o_parts.shape[0] = 0;
  a.lse_parts.shape[0] = 0;
  expect_merge_rejected(m, a, "o_parts must hold at least one state");
}

TEST(MergeStatesValidation, StridesAndDevices) {
  MergeData m;
  MergeStatesArgs a = m.args();
  a.o_parts.stride[3] = 2;
  expect_merge_rejected(m, a, "o_parts must be contiguous in its last dimension");
  a = m.args();
  a.lse_parts.stride[1] = -2;
  expect_merge_rejected(m, a, "lse_parts has a negative stride");
  a = m.args();
  a.lse.device = cuda(0);
  expect_merge_rejected(m, a, "lse is on");
  ExecOptions o = cpu_opts();
  o.backend = Backend::kCudaPortable;
  expect_merge_rejected(m, m.args(), "CUDA backend", o);
}

}  // namespace
}  // namespace attnkit::test
