// Dispatch of the WGMMA/TMA intra kernel of the whole forward (gdn_intra_sm90.cuh): checks what its
// TMA loads and 16-byte stores need. sm_90a builds only; other builds answer Unsupported.
#include <cstdint>

#include "cuda/gdn/chunk_launch.h"

#if defined(ATTNKIT_HAS_SM90A)
#include "cuda/gdn/gdn_intra_sm90.cuh"
#endif

namespace attnkit::gdn_cuda {

#if defined(ATTNKIT_HAS_SM90A)
namespace {

template <class E>
Status dispatch(const IntraParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s, int dt) {
  // Only the forward's mode with the sm90 state/output kernel: the coefficients of U and W, P and
  // the gate cumsum, computed (not given) inverse.
  if (!p.q.defined() || !p.t_out.defined() || !p.p_out.defined() || p.w.defined() || p.u.defined() ||
      p.a_inv_in.defined() || p.a_inv_out.defined())
    return Status::Internal("gdn sm90 intra: only the whole forward's outputs (U / W coefficients, P) are supported");
  for (const Tok* t : {&p.q, &p.k, &p.t_out, &p.p_out})
    if (t->dt != dt) return Status::Internal("gdn sm90 intra: q, k, the coefficients and P must share the 16-bit dtype");
  // q, k: TMA boxes; the coefficients and P: 16-byte stores.
  for (const Tok* t : {&p.q, &p.k, &p.t_out, &p.p_out})
    if (!rows_aligned16(*t))
      return Status::Internal("gdn sm90 intra: q, k, the coefficients and P need 16-byte aligned rows");
  if (p.H <= 0 || p.HV % p.H != 0 || p.H > 65535)
    return Status::Internal("gdn sm90 intra: HV must be a multiple of H (at most 65535 q/k heads)");
  if (L.T > INT32_MAX - kChunk || max_chunks > INT32_MAX)
    return Status::Unsupported("gdn sm90 intra: at most 2^31 - 65 rows");
  return sm90::launch_intra_sm90<E>(p, L, max_chunks, s);
}

}  // namespace

Status launch_intra_sm90_bf16(const IntraParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  return dispatch<cutlass::bfloat16_t>(p, L, max_chunks, s, 2);
}
Status launch_intra_sm90_fp16(const IntraParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  return dispatch<cutlass::half_t>(p, L, max_chunks, s, 1);
}
#else
Status launch_intra_sm90_bf16(const IntraParams&, const SeqLayout&, int64_t, cudaStream_t) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
Status launch_intra_sm90_fp16(const IntraParams&, const SeqLayout&, int64_t, cudaStream_t) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
#endif

}  // namespace attnkit::gdn_cuda
