// Dispatch of the WGMMA/TMA chunk-output kernel (gdn_output_sm90.cuh): which calls of the stage op
// it serves (its TMA boxes and 16-byte stores need bf16 throughout and 16-byte aligned rows; the
// stage op also takes fp32 intermediates and fp16 q/k, which the mma.sync kernel serves), and the
// launch. sm_90a builds only; other builds serve none.
#include <cstdint>

#include "cuda/gdn/chunk_launch.h"

#if defined(ATTNKIT_HAS_SM90A)
#include "cuda/gdn/gdn_output_sm90.cuh"
#endif

namespace attnkit::gdn_cuda {

#if defined(ATTNKIT_HAS_SM90A)
bool output_sm90_supports(const OutputParams& p, const SeqLayout& L, int64_t max_chunks) {
  // bf16 only: h and v_new are fp32 or bf16 (validate_gdn.cpp), and each WGMMA takes one dtype.
  const int dt = p.q.dt;
  if (dt != 2) return false;
  for (const Tok* t : {&p.k, &p.v_new, &p.o})
    if (t->dt != dt) return false;
  if (p.h.dt != dt || p.g_cum.dt != 0) return false;
  for (const Tok* t : {&p.q, &p.k, &p.v_new, &p.o})
    if (!rows_aligned16(*t)) return false;
  if ((reinterpret_cast<uintptr_t>(p.h.p) & 15) != 0 || p.h.s0 % 8 != 0 || p.h.sh % 8 != 0 || p.h.sk % 8 != 0)
    return false;
  if (p.H <= 0 || p.HV % p.H != 0 || p.HV > 65535) return false;
  // TMA coordinates are 32-bit.
  return L.T <= INT32_MAX - kChunk && L.N <= 65535 && p.h.rows <= INT32_MAX && max_chunks <= INT32_MAX;
}

Status launch_output_sm90(const OutputParams& p, const SeqLayout& L, int64_t max_chunks, int sms, cudaStream_t s) {
  if (!output_sm90_supports(p, L, max_chunks))
    return Status::Internal("gdn sm90 chunk output: called on a problem it does not serve");
  if (sms <= 0) return Status::Internal("gdn sm90 chunk output: no SM count");
  // A 2-deep h/V_new ring (96 KB in flight per SM besides Q/K): measured slightly faster than a
  // 3-deep one at 16k and on the ragged 32k batch (gdn_bench, flushed and back to back).
  return sm90::launch_output_sm90<cutlass::bfloat16_t, 2>(p, L, max_chunks, sms, s);
}
#else
bool output_sm90_supports(const OutputParams&, const SeqLayout&, int64_t) { return false; }
Status launch_output_sm90(const OutputParams&, const SeqLayout&, int64_t, int, cudaStream_t) {
  return Status::Unsupported("this attnkit build has no sm_90a target");
}
#endif

}  // namespace attnkit::gdn_cuda
