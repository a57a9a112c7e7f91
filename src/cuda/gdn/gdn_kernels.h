// Host-side launchers of the Gated DeltaNet CUDA kernels, on plain parameter structs (pointers,
// dtype codes, element strides). The API adapters (gdn_entry.cu) fill these from validated views.
// Every token tensor has its last dim contiguous; strides are in elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attnkit/status.h"

#ifdef __CUDACC__
#define ATTNKIT_HD __host__ __device__
#else
#define ATTNKIT_HD
#endif

namespace attnkit::gdn_cuda {

// A [B, T, heads, (inner)] tensor: base pointer, dtype code (0 fp32, 1 fp16, 2 bf16), strides of the
// batch, token and head dims.
struct Tok {
  void* p = nullptr;
  int dt = 0;
  int64_t sb = 0, st = 0, sh = 0;
  ATTNKIT_HD bool defined() const { return p != nullptr; }
};

// Whether a 16-bit Tok's rows start on 16-byte boundaries (aligned base, strides in multiples of 8
// elements): what the sm90 kernels' TMA boxes and 16-byte stores need.
inline bool rows_aligned16(const Tok& x) {
  return (reinterpret_cast<uintptr_t>(x.p) & 15) == 0 && x.sb % 8 == 0 && x.st % 8 == 0 && x.sh % 8 == 0;
}

// A [rows, HV, K, V] fp32/16-bit tensor (states, h): strides of dim 0, the head, K and V dims.
// h always has sv = 1; initial / final states and the decode pool may be key-last ([rows, HV, V, K]
// seen transposed: sk = 1, sv = K).
struct StateT {
  void* p = nullptr;
  int dt = 0;
  int64_t s0 = 0, sh = 0, sk = 0, sv = 1;
  int64_t rows = 0;  // first dim: writes past it are dropped
  // Optional: state i of the call lives in row slots[i] of a pool (GdnChunkArgs::state_indices).
  const int32_t* slots = nullptr;
  int64_t slot_stride = 1;
  ATTNKIT_HD bool defined() const { return p != nullptr; }
  // Row of the call's state i: i, or its slot; -1 for no state (none given, or a slot outside
  // [0, rows): padding, or an index nobody validated).
  ATTNKIT_HD int64_t row(int64_t i) const {
    if (p == nullptr) return -1;
    if (slots == nullptr) return i;
    const int64_t s = slots[i * slot_stride];
    return s >= 0 && s < rows ? s : -1;
  }
  // Element offset of S[i, hv][k, v].
  ATTNKIT_HD int64_t at(int64_t i, int64_t hv, int64_t k, int64_t v) const {
    return i * s0 + hv * sh + k * sk + v * sv;
  }
};

struct SeqArgs {
  const int32_t* cu = nullptr;  // device cu_seqlens, ragged only
  int N = 0;                    // sequences
  int64_t B = 0, T = 0;
  int64_t max_chunks = 0;       // upper bound of the global chunk count (grid size)
};

struct DecodeParams {
  Tok q, k, v, g, beta, o;   // sb = per-sequence stride, st unused
  // Fused gating (gdn.h): beta holds b and `a` has b's dtype; A_log and dt_bias are fp32 [HV].
  bool fused_gating = false;
  Tok a;
  const float* A_log = nullptr;
  const float* dt_bias = nullptr;
  StateT pool;               // [P, HV, K, V] fp32
  const int32_t* indices = nullptr;
  int64_t idx_stride = 1;
  // Several tokens per sequence (decode_multi.cu): token strides in the Toks' st; step_states
  // [N, T, HV, K, V] as a StateT over (n, hv, k, v) plus its token stride; the pool written only
  // with update_pool.
  int T = 1;
  StateT steps;
  int64_t steps_st = 0;
  bool update_pool = true;
  int N = 0, H = 0, HV = 0;
  float scale = 0.f;
  bool l2norm = false;
};
// The register kernel (any GPU) and the TMA-ring kernel (sm_90, decode_sm90.cu) take pools with
// contiguous value rows (sv = 1); decode_key_last.cu takes key-last pools (sk = 1).
Status launch_decode(const DecodeParams& p, cudaStream_t s);
Status launch_decode_sm90(const DecodeParams& p, cudaStream_t s);
Status launch_decode_key_last(const DecodeParams& p, cudaStream_t s);
// T tokens per sequence, step_states, update_pool = false; any pool / step_states layout.
Status launch_decode_multi(const DecodeParams& p, cudaStream_t s);

// Scratch for the GPU-side chunk offsets of a ragged batch: int32 [N + 1].
Status launch_chunk_offsets(const SeqArgs& seq, int32_t* chunk_off, cudaStream_t s);

// q/k L2 normalisation into contiguous [B, T, H, K] outputs of the same dtype.
Status launch_l2norm(const Tok& in, const Tok& out, int64_t B, int64_t T, int H, cudaStream_t s);

struct CumsumParams {
  Tok g, g_cum;
  int HV = 0;
};
Status launch_cumsum(const CumsumParams& p, const SeqArgs& seq, const int32_t* chunk_off,
                     cudaStream_t s);

// Stages 1-3 fused per (chunk, value head). g is raw (cumsum computed) unless g_is_cum; a_inv is
// computed unless a_inv_in is set. Outputs that are not defined are not written. With p_out (and
// q) it also writes P = tril(Q K^T (.) Gamma) [B,T,HV,64], in q's dtype, for the fused state pass;
// with t_out, C = T diag(beta) [B,T,HV,64] in q's dtype (zeros above the diagonal, rows < len),
// from which the sm90 state/output kernel computes v_new = C (V - diag(exp(g)) K S).
struct IntraParams {
  Tok k, v, beta, g;  // k [B,T,H,K] (q dtype), v [B,T,HV,V], beta/g [B,T,HV]
  bool g_is_cum = false;
  Tok a_inv_in;       // [B,T,HV,64] optional input
  Tok q, p_out;
  Tok g_cum_out, a_inv_out, t_out, w, u;
  int H = 0, HV = 0;
  int qdt = 2;        // dtype code of k / v (1 fp16, 2 bf16)
};
Status launch_intra(const IntraParams& p, const SeqArgs& seq, const int32_t* chunk_off,
                    cudaStream_t s);

struct StateParams {
  Tok k, w, u, g_cum, v_new;
  StateT h, init, fin;
  int H = 0, HV = 0;
  int qdt = 2;
};
Status launch_state_pass(const StateParams& p, const SeqArgs& seq, const int32_t* chunk_off,
                         cudaStream_t s);

// Stages 4 and 5 fused (the whole forward): h and V_new stay on chip. pm is P = tril(Q K^T (.)
// Gamma) [B, T, HV, 64] from the intra stage. q, k, w, u, pm and o share the 16-bit dtype; g_cum
// is fp32. The mma.sync kernel reads W and U; the sm90 one reads C = T diag(beta) (tu, the intra
// stage's t_out) and v instead.
struct StateOutParams {
  Tok q, k, w, u, pm, g_cum, o;
  Tok tu, v;
  StateT init, fin;
  int H = 0, HV = 0;
  float scale = 0.f;
};

struct OutputParams {
  Tok q, k, v_new, g_cum, o;
  StateT h;
  int H = 0, HV = 0;
  int qdt = 2;
  float scale = 0.f;
};
Status launch_chunk_output(const OutputParams& p, const SeqArgs& seq, const int32_t* chunk_off,
                           cudaStream_t s);

}  // namespace attnkit::gdn_cuda
