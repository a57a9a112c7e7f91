// Views of validated tensors as the Gated DeltaNet launchers take them (gdn_kernels.h's Tok and
// StateT): pointer, dtype code and element strides. Host-side.
#pragma once

#include "attnkit/tensor.h"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::detail {

inline int dt_code(DType d) { return d == DType::kFloat32 ? 0 : (d == DType::kFloat16 ? 1 : 2); }

// Token tensors [B, T, heads, (inner)].
inline gdn_cuda::Tok tok(const TensorView& t) {
  gdn_cuda::Tok r;
  if (!t.defined()) return r;
  r.p = t.data;
  r.dt = dt_code(t.dtype);
  r.sb = t.stride[0];
  r.st = t.ndim > 1 ? t.stride[1] : 0;
  r.sh = t.ndim > 2 ? t.stride[2] : 0;
  return r;
}

// States [rows, HV, K, V], any strides.
inline gdn_cuda::StateT state(const TensorView& t) {
  gdn_cuda::StateT r;
  if (!t.defined()) return r;
  r.p = t.data;
  r.dt = dt_code(t.dtype);
  r.s0 = t.stride[0];
  r.sh = t.stride[1];
  r.sk = t.stride[2];
  r.sv = t.stride[3];
  r.rows = t.shape[0];
  return r;
}

// t without dimension d (its index 0 there), e.g. [N, T, HV, K, V] step states as [N, HV, K, V].
inline TensorView drop_dim(TensorView t, int d) {
  for (int i = d; i + 1 < t.ndim; ++i) {
    t.shape[i] = t.shape[i + 1];
    t.stride[i] = t.stride[i + 1];
  }
  --t.ndim;
  return t;
}

}  // namespace attnkit::detail
