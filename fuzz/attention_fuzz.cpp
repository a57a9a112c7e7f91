// libFuzzer target over attention_forward on the CPU backend: the input bytes choose shapes,
// layouts (contiguous, seqused, ragged, paged), dtypes (FP8 caches, FP8 attention with e4m3 Q, and
// every scale kind), head dims (MLA's 576 / 512 too),
// padded strides, masks, options, and the raw contents of every index tensor (cu_seqlens, page
// tables, seqused_k, unvalidated). Every tensor is its own heap allocation of exactly the span
// its view claims, so AddressSanitizer reports any read or write outside it. The op must return
// a Status (any code) and never crash. Built with -DATTNKIT_BUILD_FUZZERS=ON (clang); run by
// scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attnkit/attention.h"

#include "fuzz_input.h"

using namespace attnkit::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnkit;
  Bytes in{data, size};
  const int layout = in.pick(3);  // contiguous, seqused, ragged, paged
  const int batch = 1 + in.pick(2), sq = in.pick(5), sk = in.pick(40);
  const int hkv = 1 + in.pick(2), hq = hkv * (1 + in.pick(2));
  const int dims = in.pick(3);  // 32, 64, or MLA's 576 / 512
  const int d = dims == 3 ? 576 : dims == 2 ? 64 : 32, dv = dims == 3 ? 512 : d;
  const DType dt = in.pick(2) == 0 ? DType::kFloat32 : in.pick(1) ? DType::kBFloat16 : DType::kFloat16;
  const bool fp8 = dt != DType::kFloat32 && in.pick(3) == 0;
  const bool q8 = fp8 && in.pick(1);  // FP8 attention: e4m3 Q as well
  const DType kvt = fp8 ? DType::kFloat8E4M3 : dt, qt = q8 ? DType::kFloat8E4M3 : dt;
  const int64_t pad = in.pick(1) ? 8 : 0;
  const bool ragged_q = layout == 2 && in.pick(1);

  Owned q, k, v, o, lse, cu_q, cu_k, table, used, qs, ks, vs, sinks, alibi;
  const int total_q = ragged_q ? in.pick(12) : 0;
  q = ragged_q ? make(qt, {total_q, hq, d}, pad, in) : make(qt, {batch, sq, hq, d}, pad, in);
  o = ragged_q ? make(dt, {total_q, hq, dv}, pad, in) : make(dt, {batch, sq, hq, dv}, pad, in);
  if (in.pick(1))
    lse = ragged_q ? make(DType::kFloat32, {total_q, hq}, 0, in)
                   : make(DType::kFloat32, {batch, sq, hq}, 0, in);
  if (ragged_q) cu_q = ints({batch + 1}, in);
  std::vector<int64_t> kv_shape;
  if (layout <= 1) {
    kv_shape = {batch, sk, hkv, d};
    if (layout == 1) used = ints({batch}, in);
  } else if (layout == 2) {
    kv_shape = {sk, hkv, d};
    cu_k = ints({batch + 1}, in);
  } else {
    const int page = 1 + in.pick(7), pages = 1 + in.pick(6);
    kv_shape = {pages, page, hkv, d};
    table = ints({batch, 1 + in.pick(5)}, in);
    used = ints({batch}, in);
  }
  k = make(kvt, kv_shape, pad, in);
  std::vector<int64_t> v_shape = kv_shape;
  v_shape.back() = dv;
  v = make(kvt, v_shape, 0, in);
  // A scale of each kind (attention.h) for a tensor of `shape` with `heads` heads.
  auto scale_shape = [&](const std::vector<int64_t>& shape, int64_t heads) {
    const int kind = in.pick(3);
    return kind == 0   ? std::vector<int64_t>{1}
           : kind == 1 ? std::vector<int64_t>{heads}
           : kind == 2 ? std::vector<int64_t>(shape.begin(), shape.end() - 1)
                       : std::vector<int64_t>{batch, hkv};
  };
  if (fp8) {
    const std::vector<int64_t> sshape = scale_shape(kv_shape, hkv);
    ks = make(DType::kFloat32, sshape, 0, in);
    vs = make(DType::kFloat32, sshape, 0, in);
  }
  if (q8) {
    const std::vector<int64_t> q_shape = ragged_q ? std::vector<int64_t>{total_q, hq, d}
                                                  : std::vector<int64_t>{batch, sq, hq, d};
    qs = make(DType::kFloat32, scale_shape(q_shape, hq), 0, in);
  }
  if (in.pick(3) == 0) sinks = make(DType::kFloat32, {hq}, 0, in);
  if (in.pick(3) == 0) alibi = make(DType::kFloat32, {hq}, 0, in);

  AttentionArgs a;
  a.q = q.view;
  a.k = k.view;
  a.v = v.view;
  a.o = o.view;
  a.lse = lse.view;
  a.cu_seqlens_q = cu_q.view;
  a.cu_seqlens_k = cu_k.view;
  a.page_table = table.view;
  a.seqused_k = used.view;
  a.q_scale = qs.view;
  a.k_scale = ks.view;
  a.v_scale = vs.view;
  a.sinks = sinks.view;
  a.alibi_slopes = alibi.view;
  a.mask = Mask{in.pick(8) - 1, in.pick(8) - 1, in.pick(3) * 4};
  a.softcap = in.pick(3) == 0 ? 5.f : 0.f;
  a.num_splits = in.pick(3);
  a.max_seqlen_q = in.pick(8);
  a.max_seqlen_k = in.pick(40);
  report(attention_forward(a, cpu_opts()));
  return 0;
}
