// Calls whose tensors are partly on the host and partly on a CUDA device are refused before any
// data is read, naming the tensor that is elsewhere: attention (either side first, also through
// plan_attention), merge_states, append_kv_cache and the Gated DeltaNet decode step. Outputs stay
// poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "attnkit/attnkit.h"
#include "testkit/buffer.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

void expect_refused(const Status& st, const char* name) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find(std::string(name) + " is on"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("but the other tensors are on"), std::string::npos) << st.message();
}

Buffer random(DType dt, std::vector<int64_t> shape, Device where, std::mt19937_64& rng) {
  Buffer h(dt, std::move(shape));
  testkit::fill_normal(h, rng);
  return where.type == DeviceType::kCPU ? std::move(h) : h.to(where);
}

TEST(MixedDevices, AttentionRefusesAHostKWithDeviceQ) {
  std::mt19937_64 rng(1);
  for (bool q_on_device : {true, false}) {
    SCOPED_TRACE(q_on_device ? "q on the device, k on the host" : "q on the host, k on the device");
    const Device qd = q_on_device ? cuda(0) : cpu(), kd = q_on_device ? cpu() : cuda(0);
    Buffer q = random(DType::kBFloat16, {1, 4, 2, 128}, qd, rng);
    Buffer k = random(DType::kBFloat16, {1, 4, 2, 128}, kd, rng);
    Buffer v = random(DType::kBFloat16, {1, 4, 2, 128}, qd, rng);
    Buffer o(DType::kBFloat16, {1, 4, 2, 128}, qd);
    o.poison();
    AttentionArgs a;
    a.q = q.view();
    a.k = k.view();
    a.v = v.view();
    a.o = o.view();
    expect_refused(attention_forward(a), "k");
    AttentionPlan plan;
    expect_refused(plan_attention(a, {}, &plan), "k");
    const std::vector<float> after = o.to_float();
    for (float x : after) ASSERT_TRUE(std::isnan(x)) << "o was written";
  }
}

TEST(MixedDevices, OtherOpsRefuseAHostTensor) {
  std::mt19937_64 rng(2);
  Buffer parts = random(DType::kFloat32, {2, 3, 2, 64}, cuda(0), rng);
  Buffer lse_parts = random(DType::kFloat32, {2, 3, 2}, cpu(), rng);
  Buffer o(DType::kFloat32, {3, 2, 64}, cuda(0)), lse(DType::kFloat32, {3, 2}, cuda(0));
  MergeStatesArgs m;
  m.o_parts = parts.view();
  m.lse_parts = lse_parts.view();
  m.o = o.view();
  m.lse = lse.view();
  expect_refused(merge_states(m), "lse_parts");

  Buffer k = random(DType::kBFloat16, {3, 2, 64}, cuda(0), rng);
  Buffer v = random(DType::kBFloat16, {3, 2, 64}, cuda(0), rng);
  Buffer kc(DType::kBFloat16, {2, 16, 2, 64}, cuda(0)), vc(DType::kBFloat16, {2, 16, 2, 64}, cpu());
  Buffer slots(DType::kInt32, {3}, cpu());
  slots.from_int({0, 5, 9});
  Buffer dslots = slots.to(cuda(0));
  AppendKvArgs ap;
  ap.k = k.view();
  ap.v = v.view();
  ap.k_cache = kc.view();
  ap.v_cache = vc.view();
  ap.slot_mapping = dslots.view();
  expect_refused(append_kv_cache(ap), "v_cache");

  Buffer q = random(DType::kBFloat16, {2, 1, 128}, cuda(0), rng);
  Buffer gv = random(DType::kBFloat16, {2, 2, 128}, cuda(0), rng);
  Buffer g(DType::kFloat32, {2, 2}, cuda(0)), beta(DType::kFloat32, {2, 2}, cuda(0));
  Buffer pool(DType::kFloat32, {3, 2, 128, 128}, cpu()), idx(DType::kInt32, {2}, cuda(0));
  Buffer go(DType::kBFloat16, {2, 2, 128}, cuda(0));
  GdnDecodeArgs d;
  d.q = d.k = q.view();
  d.v = gv.view();
  d.g = g.view();
  d.beta = beta.view();
  d.state_pool = pool.view();
  d.state_indices = idx.view();
  d.o = go.view();
  expect_refused(gdn_decode_step(d), "state_pool");
}

}  // namespace
}  // namespace attnkit::test
