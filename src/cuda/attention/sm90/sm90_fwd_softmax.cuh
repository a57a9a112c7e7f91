// The online softmax of the Hopper prefill kernel's consumers (sm90_fwd_kernel.cuh).
#pragma once

#include "cuda/attention/sm90/sm90_fwd_config.cuh"

namespace attnkit::gpu::sm90 {

using namespace cute;

CUTE_DEVICE float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// Online softmax of one S tile in registers (rows x keys of this thread, already masked), in
// the units of the scores: exp2 takes scale_log2 (scale * log2 e) folded in. Updates each row's
// running max and sum, turns S into P, and gives O's correction factor per row; returns whether
// any of them is not 1.
template <int kRows, class TensorS>
CUTE_DEVICE bool online_softmax(TensorS& S, float (&row_max)[kRows], float (&row_sum)[kRows],
                                float (&corr)[kRows], float scale_log2) {
  // Row max and row sum in kAcc interleaved partial chains: one chain of N/4 dependent FMNMX or
  // FADD per row sat on the softmax's critical path, which ping-pong must fit under the other
  // warpgroups' GEMMs.
  constexpr int kCols = decltype(size<1>(S))::value;
  constexpr int kAcc = 4;  // the combines below add and compare exactly four partials
  static_assert(kCols % kAcc == 0);
  bool rescale = false;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    float part[kAcc];
    CUTE_UNROLL
    for (int a = 0; a < kAcc; ++a) part[a] = row_max[r];
    CUTE_UNROLL
    for (int c = 0; c < kCols; ++c) part[c % kAcc] = fmaxf(part[c % kAcc], S(r, c));
    float mx = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
    mx = quad_max(mx);
    // A row that has seen no visible key keeps max -inf; subtract 0 then so exp2 gives 0, not NaN.
    const float mx_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;
    corr[r] = mx == row_max[r] ? 1.f : exp2f(row_max[r] * scale_log2 - mx_scaled);
    rescale |= mx != row_max[r];
    row_max[r] = mx;
    CUTE_UNROLL
    for (int a = 0; a < kAcc; ++a) part[a] = 0.f;
    CUTE_UNROLL
    for (int c = 0; c < kCols; ++c) {
      S(r, c) = exp2f(S(r, c) * scale_log2 - mx_scaled);
      part[c % kAcc] += S(r, c);
    }
    row_sum[r] = row_sum[r] * corr[r] + ((part[0] + part[1]) + (part[2] + part[3]));
  }
  return rescale;
}

}  // namespace attnkit::gpu::sm90
