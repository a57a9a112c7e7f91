// libFuzzer target over merge_states on the CPU backend: the input bytes choose the number of
// partial states, tokens, heads and head size, the dtypes of the partial and merged outputs,
// padded and permuted strides (partials stored [N, T, H, D] or [T, H, N, D], LSEs [N, T, H] or
// [T, H, N], the merged LSE [T, H] or [H, T]), LSE contents with empty (-inf) and extreme states,
// and now and then one argument made wrong (rank, dtype, a dimension off by one). Every tensor is
// its own heap allocation of exactly the span its view claims, so AddressSanitizer reports any
// read or write outside it. The op must return a Status (any code) and never crash. Built with
// -DATTNKIT_BUILD_FUZZERS=ON (clang); run by scripts/fuzz.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attnkit/attention.h"

#include "fuzz_input.h"

namespace {

using namespace attnkit::fuzz;

// LSE values: finite, large, empty (-inf), now and then +inf or NaN.
void fill_lse(Owned& t, Bytes& in) {
  static const float kVals[16] = {0.f,  1.f,   -1.f,  2.5f,   -INFINITY, -INFINITY, 30.f,     -30.f,
                                  88.f, -88.f, 1e30f, -1e30f, 0.5f,      -INFINITY, INFINITY, NAN};
  if (t.view.dtype != attnkit::DType::kFloat32) return;
  auto* v = reinterpret_cast<float*>(t.mem.data());
  for (size_t i = 0; i < t.mem.size() / 4; ++i) v[i] = kVals[in.next() % 16];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnkit;
  Bytes in{data, size};
  // Byte 0 (also what an exhausted input reads) picks the common valid case: n = 1, t = 1.
  const int n = (1 + in.pick(4)) % 5, t = (1 + in.pick(9)) % 10, h = 1 + in.pick(3);
  static const int kDims[8] = {1, 3, 8, 16, 32, 64, 128, 0};
  const int d = kDims[in.pick(7)];
  static const DType kTypes[4] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16,
                                  DType::kFloat32};
  DType pt = kTypes[in.pick(3)], ot = kTypes[in.pick(3)], lt = DType::kFloat32;
  const int64_t pad = in.pick(1) ? 8 : 0;
  const bool parts_thn = in.pick(1);  // partials stored [T, H, N, D] (split-KV kernels' order)
  const bool lse_thn = in.pick(1);
  const bool lse_ht = in.pick(1);
  // 0: all valid; 1..7: one argument made wrong.
  const int wrong = in.pick(15) < 12 ? 0 : 1 + in.pick(6);
  if (wrong == 1) pt = DType::kInt32;
  if (wrong == 2) ot = DType::kFloat8E4M3;
  if (wrong == 3) lt = DType::kFloat16;
  const int t_o = wrong == 4 ? t + 1 : t;   // o with one token too many
  const int h_l = wrong == 5 ? h + 1 : h;   // lse_parts with one head too many
  const int d_o = wrong == 6 ? d + 1 : d;   // o with a wider head

  Owned o_parts, lse_parts, o, lse;
  if (wrong == 7) {
    o_parts = make(pt, {n, t, h * d}, pad, in);  // rank 3
  } else {
    o_parts = parts_thn ? make_perm(pt, {t, h, n, d}, {2, 0, 1, 3}, pad, in)
                        : make(pt, {n, t, h, d}, pad, in);
  }
  lse_parts = lse_thn ? make_perm(lt, {t, h_l, n}, {2, 0, 1}, 0, in)
                      : make(lt, {n, t, h_l}, pad, in);
  fill_lse(lse_parts, in);
  o = make(ot, {t_o, h, d_o}, pad, in);
  if (in.pick(1)) lse = lse_ht ? make_perm(DType::kFloat32, {h, t}, {1, 0}, 0, in)
                               : make(DType::kFloat32, {t, h}, pad, in);

  MergeStatesArgs a;
  a.o_parts = o_parts.view;
  a.lse_parts = lse_parts.view;
  a.o = o.view;
  a.lse = lse.view;
  report(merge_states(a, cpu_opts()));
  return 0;
}
