// fp32 O under bf16 / fp16 Q (partial outputs kept exact for merge_states, as context-parallel
// schemes merge them) on the CPU backend: O is, bit for bit, what the same backend gives on fp32
// copies of the inputs, so nothing is rounded to 16 bits; a 16-bit O is that rounded once.
// Other O dtypes are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/attention_case.h"
#include "common/attention_check.h"
#include "common/fp8_kv.h"
#include "cpu/half.h"
#include "cpu_attention_util.h"

namespace attnkit::test {
namespace {

using testkit::Buffer;

// An fp32 copy of a viewed buffer, element for element (like() then views it with the same
// strides).
Buffer fp32_copy(const ViewedBuffer& x) {
  Buffer b(DType::kFloat32, x.buf.shape());
  b.from_float(x.buf.to_float());
  return b;
}

TEST(AttentionFp32Out, SixteenBitInputsWriteExactFp32Outputs) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    AttnCase c = AttnCase::uniform(2, 19, 45);
    c.dtype = dt;
    c.hq = 4;
    c.hkv = 2;
    c.mask = Mask::causal();
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    Buffer o32(DType::kFloat32, d.o.buf.shape());
    AttentionArgs a = d.args();
    a.o = like(d.o.view, o32);
    Status st = attention_forward(a, cpu_opts());
    ASSERT_TRUE(st.ok()) << st.message();

    ASSERT_EQ(d.q.view.data, d.q.buf.data());  // views start at their buffers (like() assumes it)
    Buffer q = fp32_copy(d.q), k = fp32_copy(d.k), v = fp32_copy(d.v);
    Buffer want32(DType::kFloat32, d.o.buf.shape());
    AttentionArgs r = d.args();
    r.q = like(d.q.view, q);
    r.k = like(d.k.view, k);
    r.v = like(d.v.view, v);
    r.o = like(d.o.view, want32);
    st = attention_forward(r, cpu_opts());
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(read_view(a.o), read_view(r.o));

    ASSERT_TRUE(attention_forward(d.args(), cpu_opts()).ok());  // O in q's dtype
    const std::vector<float> o16 = read_view(d.o.view), o = read_view(a.o);
    for (size_t i = 0; i < o.size(); ++i) ASSERT_EQ(o16[i], ref::round_to(dt, o[i])) << i;
  }
  AttnData d = make_attn_data(AttnCase::uniform(1, 4, 8));
  Buffer o16(DType::kFloat16, d.o.buf.shape());
  AttentionArgs a = d.args();
  a.o = like(d.o.view, o16);
  const Status st = attention_forward(a, cpu_opts());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("o has dtype fp16"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace attnkit::test
