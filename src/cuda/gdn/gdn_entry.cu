// The CUDA entry points of Gated DeltaNet: turn validated views into the kernels' parameter
// structs, find scratch memory, and launch on the caller's stream. Device-side cu_seqlens and
// state indices are never read here: the kernels clamp them (see gdn_device.cuh, decode.cu).
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <utility>

#include "api/backends.h"
#include "api/check.h"
#include "api/gdn_backends.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"
#include "cuda/gdn/chunk_launch.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_views.h"

namespace attnkit::detail {
namespace {

using gdn_cuda::Tok;
using gdn_cuda::StateT;

// Scratch carved from ExecOptions::workspace when it is large enough, else one stream-ordered
// allocation freed (stream-ordered) when this goes out of scope.
class Scratch {
 public:
  Scratch(const ExecOptions& o, cudaStream_t s) : opts_(o), stream_(s) {}
  ~Scratch() {
    if (owned_) cudaFreeAsync(owned_, stream_);
  }
  // Reserve bytes (16-byte aligned pieces); call alloc() once after every reserve.
  size_t reserve(size_t bytes) {
    const size_t off = total_;
    total_ += (bytes + 255) / 256 * 256;
    return off;
  }
  Status alloc() {
    if (total_ == 0) return Status::Ok();
    if (opts_.workspace != nullptr && opts_.workspace_bytes >= total_) {
      base_ = static_cast<char*>(opts_.workspace);
      return Status::Ok();
    }
    ATTNKIT_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&owned_), total_, stream_));
    base_ = owned_;
    return Status::Ok();
  }
  template <typename P>
  P* at(size_t off) const { return reinterpret_cast<P*>(base_ + off); }

 private:
  const ExecOptions& opts_;
  cudaStream_t stream_;
  size_t total_ = 0;
  char* base_ = nullptr;
  char* owned_ = nullptr;
};

Status need_gpu_shape(const GdnProblem& p, const char* op) {
  if (p.K != 0 && p.K != kGdnGpuHeadDim)
    return Status::Unsupported(std::string(op) + ": the CUDA kernels need K = 128, got " + std::to_string(p.K));
  if (p.V != 0 && p.V != kGdnGpuHeadDim)
    return Status::Unsupported(std::string(op) + ": the CUDA kernels need V = 128, got " + std::to_string(p.V));
  return Status::Ok();
}

Status need_16bit(DType d, const char* op) {
  if (d != DType::kBFloat16 && d != DType::kFloat16)
    return Status::Unsupported(std::string(op) + ": the CUDA kernels take bf16 or fp16 q/k/v, not " +
                               to_string(d));
  return Status::Ok();
}

// Tensors the kernels read as 16-byte vectors (16-bit ones; fp32 intermediates are read by element).
Status need_aligned(const TensorView& t, const char* name) {
  if (!t.defined() || t.dtype == DType::kFloat32) return Status::Ok();
  return require_vector_aligned(t, name);
}

Status grid_limits(const GdnProblem& p) {
  if (p.N > 65535 || p.HV > 65535)
    return Status::Unsupported("the CUDA kernels take at most 65535 sequences and value heads");
  return Status::Ok();
}

// The sequence layout and, for ragged batches, the GPU-side chunk offsets (computed into scratch).
struct SeqSetup {
  gdn_cuda::SeqArgs seq;
  size_t off_slot = 0;
  Status init(const GdnProblem& p, const TensorView& cu, Scratch* scratch) {
    seq.N = static_cast<int>(p.N);
    seq.B = p.B;
    seq.T = p.T;
    const int64_t per = (p.T + kGdnChunk - 1) / kGdnChunk;
    if (p.varlen) {
      if (cu.stride[0] != 1 && cu.shape[0] > 1)
        return Status::Unsupported("cu_seqlens must be contiguous for the CUDA kernels");
      seq.cu = static_cast<const int32_t*>(cu.data);
      seq.max_chunks = per + p.N;  // each sequence adds at most one partial chunk
      off_slot = scratch->reserve(sizeof(int32_t) * (p.N + 1));
    } else {
      seq.max_chunks = p.B * per;
    }
    return Status::Ok();
  }
  Status launch(Scratch& scratch, cudaStream_t s, const int32_t** chunk_off) {
    *chunk_off = nullptr;
    if (seq.cu == nullptr) return Status::Ok();
    int32_t* off = scratch.at<int32_t>(off_slot);
    ATTNKIT_RETURN_IF_ERROR(gdn_cuda::launch_chunk_offsets(seq, off, s));
    *chunk_off = off;
    return Status::Ok();
  }
};

// What every chunked op does around its kernels: select the device, find scratch memory and, for
// ragged batches, compute the chunk offsets on the GPU. Ops that need more scratch reserve it
// between begin() and ready().
class StageCall {
 public:
  StageCall(const GdnProblem& p, const ExecOptions& opts)
      : guard_(p.device.index), stream_(static_cast<cudaStream_t>(opts.stream)), scratch_(opts, stream_) {}
  Status begin(const GdnProblem& p, const TensorView& cu_seqlens) {
    if (!guard_.ok())
      return Status::Cuda("Gated DeltaNet: cannot select CUDA device " + std::to_string(p.device.index));
    ATTNKIT_RETURN_IF_ERROR(ss_.init(p, cu_seqlens, &scratch_));
    return grid_limits(p);
  }
  Status ready() {
    ATTNKIT_RETURN_IF_ERROR(scratch_.alloc());
    return ss_.launch(scratch_, stream_, &off_);
  }
  Status start(const GdnProblem& p, const TensorView& cu_seqlens) {
    ATTNKIT_RETURN_IF_ERROR(begin(p, cu_seqlens));
    return ready();
  }
  Scratch& scratch() { return scratch_; }
  cudaStream_t stream() const { return stream_; }
  const gdn_cuda::SeqArgs& seq() const { return ss_.seq; }
  const int32_t* offsets() const { return off_; }

 private:
  DeviceGuard guard_;  // first: the device is selected before any allocation
  cudaStream_t stream_;
  Scratch scratch_;
  SeqSetup ss_;
  const int32_t* off_ = nullptr;
};

gdn_cuda::SeqLayout layout(const gdn_cuda::SeqArgs& seq, const int32_t* off) {
  return gdn_cuda::make_layout(seq.cu, off, seq.T, seq.N);
}

Status run_intra(DType dt, const gdn_cuda::IntraParams& p, const StageCall& c) {
  const gdn_cuda::SeqArgs& seq = c.seq();
  const int32_t* off = c.offsets();
  const cudaStream_t s = c.stream();
  if (seq.max_chunks == 0 || p.HV == 0) return Status::Ok();
  return dt == DType::kBFloat16 ? gdn_cuda::launch_intra_bf16(p, layout(seq, off), seq.max_chunks, s)
                                : gdn_cuda::launch_intra_fp16(p, layout(seq, off), seq.max_chunks, s);
}
Status run_state(DType dt, const gdn_cuda::StateParams& p, const StageCall& c) {
  const gdn_cuda::SeqArgs& seq = c.seq();
  const int32_t* off = c.offsets();
  const cudaStream_t s = c.stream();
  if (seq.N == 0 || p.HV == 0) return Status::Ok();
  return dt == DType::kBFloat16 ? gdn_cuda::launch_state_bf16(p, layout(seq, off), s)
                                : gdn_cuda::launch_state_fp16(p, layout(seq, off), s);
}
// The WGMMA/TMA kernels (the forward's intra and fused state/output, the chunk-output stage op,
// the decode step's bulk-copy ring) where the build has sm_90a code and the device is an sm_90
// one; the mma.sync (decode: register) kernels elsewhere, and where GdnKernels asks for them.
bool use_sm90(const CudaDeviceInfo& d, const GdnKernels& k) {
#if defined(ATTNKIT_HAS_SM90A)
  return d.cc_major == 9 && d.cc_minor == 0 && !k.mma_sync;
#else
  (void)d;
  (void)k;
  return false;
#endif
}
bool use_sm90(int device, const GdnKernels& k) {
  CudaDeviceInfo d;
  return cuda_device_info(device, &d).ok() && use_sm90(d, k);
}
bool use_sm90_intra(int device, const GdnKernels& k) {
  return use_sm90(device, k) && !k.mma_sync_intra;
}

// The whole forward's intra stage (every output but the inverse).
Status run_intra_forward(DType dt, const gdn_cuda::IntraParams& p, const StageCall& c, int device,
                         const GdnKernels& k) {
  const gdn_cuda::SeqArgs& seq = c.seq();
  if (seq.max_chunks == 0 || p.HV == 0 || !use_sm90_intra(device, k)) return run_intra(dt, p, c);
  const gdn_cuda::SeqLayout L = layout(seq, c.offsets());
  return dt == DType::kBFloat16 ? gdn_cuda::launch_intra_sm90_bf16(p, L, seq.max_chunks, c.stream())
                                : gdn_cuda::launch_intra_sm90_fp16(p, L, seq.max_chunks, c.stream());
}

// The sm90 kernel where the forward handed over W's and U's coefficients (it decided, by
// use_sm90, when it laid out the scratch), the mma.sync one where it handed over W, U.
Status run_state_output(DType dt, const gdn_cuda::StateOutParams& p, const StageCall& c,
                        const GdnKernels& k) {
  const gdn_cuda::SeqArgs& seq = c.seq();
  const int32_t* off = c.offsets();
  const cudaStream_t s = c.stream();
  if (seq.N == 0 || p.HV == 0) return Status::Ok();
  if (p.tu.defined()) {
    const gdn_cuda::SoVariant v{k.state_output_cols, k.state_output_cluster};
    return dt == DType::kBFloat16
               ? gdn_cuda::launch_state_output_sm90_bf16(p, layout(seq, off), s, v)
               : gdn_cuda::launch_state_output_sm90_fp16(p, layout(seq, off), s, v);
  }
  return dt == DType::kBFloat16 ? gdn_cuda::launch_state_output_bf16(p, layout(seq, off), s)
                                : gdn_cuda::launch_state_output_fp16(p, layout(seq, off), s);
}
// The chunk-output stage op: the WGMMA/TMA kernel on sm_90 where its loads and stores fit the
// tensors (bf16 throughout, 16-byte aligned rows: output_sm90_supports), the mma.sync kernel
// otherwise (other GPUs, fp32 intermediates, fp16 q/k; GdnKernels::mma_sync on Hopper).
Status run_output(DType dt, const gdn_cuda::OutputParams& p, const StageCall& c, int device,
                  const GdnKernels& k) {
  const gdn_cuda::SeqArgs& seq = c.seq();
  const int32_t* off = c.offsets();
  const cudaStream_t s = c.stream();
  if (seq.max_chunks == 0 || p.HV == 0) return Status::Ok();
  const gdn_cuda::SeqLayout L = layout(seq, off);
  if (use_sm90(device, k) && gdn_cuda::output_sm90_supports(p, L, seq.max_chunks)) {
    CudaDeviceInfo d;
    ATTNKIT_RETURN_IF_ERROR(cuda_device_info(device, &d));
    return gdn_cuda::launch_output_sm90(p, L, seq.max_chunks, d.sm_count, s);
  }
  return dt == DType::kBFloat16 ? gdn_cuda::launch_output_bf16(p, L, seq.max_chunks, s)
                                : gdn_cuda::launch_output_fp16(p, L, seq.max_chunks, s);
}

}  // namespace

Status cuda_gdn_chunk_cumsum(const GdnCumsumArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  StageCall call(p, opts);
  ATTNKIT_RETURN_IF_ERROR(call.start(p, a.cu_seqlens));
  gdn_cuda::CumsumParams cp;
  cp.g = tok(a.g);
  cp.g_cum = tok(a.g_cum);
  cp.HV = static_cast<int>(p.HV);
  return gdn_cuda::launch_cumsum(cp, call.seq(), call.offsets(), call.stream());
}

Status cuda_gdn_kkt_inverse(const GdnKktInverseArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  ATTNKIT_RETURN_IF_ERROR(need_gpu_shape(p, "gdn_kkt_inverse"));
  ATTNKIT_RETURN_IF_ERROR(need_16bit(p.dtype, "gdn_kkt_inverse"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.k, "k"));
  StageCall call(p, opts);
  ATTNKIT_RETURN_IF_ERROR(call.start(p, a.cu_seqlens));
  gdn_cuda::IntraParams ip;
  ip.k = tok(a.k);
  ip.beta = tok(a.beta);
  ip.g = tok(a.g_cum);
  ip.g_is_cum = true;
  ip.a_inv_out = tok(a.a_inv);
  ip.H = static_cast<int>(p.H);
  ip.HV = static_cast<int>(p.HV);
  return run_intra(p.dtype, ip, call);
}

Status cuda_gdn_wu(const GdnWuArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  ATTNKIT_RETURN_IF_ERROR(need_gpu_shape(p, "gdn_wu"));
  ATTNKIT_RETURN_IF_ERROR(need_16bit(p.dtype, "gdn_wu"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.k, "k"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.v, "v"));
  StageCall call(p, opts);
  ATTNKIT_RETURN_IF_ERROR(call.start(p, a.cu_seqlens));
  gdn_cuda::IntraParams ip;
  ip.k = tok(a.k);
  ip.v = tok(a.v);
  ip.beta = tok(a.beta);
  ip.g = tok(a.g_cum);
  ip.g_is_cum = true;
  ip.a_inv_in = tok(a.a_inv);
  ip.w = tok(a.w);
  ip.u = tok(a.u);
  ip.H = static_cast<int>(p.H);
  ip.HV = static_cast<int>(p.HV);
  return run_intra(p.dtype, ip, call);
}

Status cuda_gdn_state_pass(const GdnStateArgs& a, const GdnProblem& p, const ExecOptions& opts) {
  ATTNKIT_RETURN_IF_ERROR(need_gpu_shape(p, "gdn_state_pass"));
  ATTNKIT_RETURN_IF_ERROR(need_16bit(p.dtype, "gdn_state_pass"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.k, "k"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.w, "w"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.u, "u"));
  StageCall call(p, opts);
  ATTNKIT_RETURN_IF_ERROR(call.start(p, a.cu_seqlens));
  gdn_cuda::StateParams sp;
  sp.k = tok(a.k);
  sp.w = tok(a.w);
  sp.u = tok(a.u);
  sp.g_cum = tok(a.g_cum);
  sp.v_new = tok(a.v_new);
  sp.h = state(a.h);
  sp.init = state(a.initial_state);
  sp.fin = state(a.final_state);
  sp.H = static_cast<int>(p.H);
  sp.HV = static_cast<int>(p.HV);
  return run_state(p.dtype, sp, call);
}

Status cuda_gdn_chunk_output(const GdnOutputArgs& a, const GdnProblem& p, const ExecOptions& opts,
                             const GdnKernels& kernels) {
  ATTNKIT_RETURN_IF_ERROR(need_gpu_shape(p, "gdn_chunk_output"));
  ATTNKIT_RETURN_IF_ERROR(need_16bit(p.dtype, "gdn_chunk_output"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.q, "q"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.k, "k"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.v_new, "v_new"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.h, "h"));
  StageCall call(p, opts);
  ATTNKIT_RETURN_IF_ERROR(call.start(p, a.cu_seqlens));
  gdn_cuda::OutputParams op;
  op.q = tok(a.q);
  op.k = tok(a.k);
  op.v_new = tok(a.v_new);
  op.g_cum = tok(a.g_cum);
  op.o = tok(a.o);
  op.h = state(a.h);
  op.H = static_cast<int>(p.H);
  op.HV = static_cast<int>(p.HV);
  op.scale = p.scale;
  return run_output(p.dtype, op, call, p.device.index, kernels);
}

// The whole forward: [l2norm] -> fused cumsum/kkt/inverse/P and W/U -> fused state pass + output,
// with 16-bit P and fp32 gates in scratch; h and V_new never leave the chip. On sm_90 (WGMMA/TMA,
// gdn_state_output_sm90.cuh) the intra stage hands over C = T diag(beta) (64 columns) and the
// state/output kernel computes v_new = C (V - diag(exp(g)) K S); elsewhere (mma.sync) it hands over
// W and U (128 columns each), all in 16 bits.
Status cuda_gdn_chunk_forward(const GdnChunkArgs& a, const GdnProblem& p, const ExecOptions& opts,
                              const GdnKernels& kernels) {
  ATTNKIT_RETURN_IF_ERROR(need_gpu_shape(p, "gdn_chunk_forward"));
  if (kernels.segments > 1) return cuda_gdn_chunk_forward_split(a, p, opts, kernels);
  ATTNKIT_RETURN_IF_ERROR(need_16bit(p.dtype, "gdn_chunk_forward"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.q, "q"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.k, "k"));
  ATTNKIT_RETURN_IF_ERROR(need_aligned(a.v, "v"));
  StageCall call(p, opts);
  ATTNKIT_RETURN_IF_ERROR(call.begin(p, a.cu_seqlens));
  Scratch& scratch = call.scratch();
  const cudaStream_t s = call.stream();
  const int64_t BT = p.B * p.T, D = kGdnGpuHeadDim;
  const size_t e16 = 2;
  const size_t qn_off = p.use_qk_l2norm ? scratch.reserve(BT * p.H * D * e16) : 0;
  const size_t kn_off = p.use_qk_l2norm ? scratch.reserve(BT * p.H * D * e16) : 0;
  // Gates [B, T, HVp], HVp = HV rounded up to 4: 16-byte rows, so the sm90 kernel loads a chunk's
  // gates as one aligned TMA box of 4 heads x 64 rows.
  const int64_t HVp = (p.HV + 3) / 4 * 4;
  const size_t gc_off = scratch.reserve(BT * HVp * sizeof(float));
  const bool sm90 = use_sm90(p.device.index, kernels);
  const size_t w_off = sm90 ? 0 : scratch.reserve(BT * p.HV * D * e16);
  const size_t u_off = sm90 ? 0 : scratch.reserve(BT * p.HV * D * e16);
  const size_t t_off = sm90 ? scratch.reserve(BT * p.HV * kGdnChunk * e16) : 0;
  const size_t p_off = scratch.reserve(BT * p.HV * kGdnChunk * e16);
  ATTNKIT_RETURN_IF_ERROR(call.ready());

  const int qdt = dt_code(p.dtype);
  // [B, T, heads, inner] 16-bit scratch in q's dtype.
  auto contiguous = [&](size_t at, int64_t heads, int64_t inner) {
    Tok t;
    t.p = scratch.at<char>(at);
    t.dt = qdt;
    t.sh = inner;
    t.st = heads * inner;
    t.sb = p.T * t.st;
    return t;
  };
  Tok q = tok(a.q), k = tok(a.k);
  if (p.use_qk_l2norm) {
    Tok qn = contiguous(qn_off, p.H, D), kn = contiguous(kn_off, p.H, D);
    ATTNKIT_RETURN_IF_ERROR(gdn_cuda::launch_l2norm(q, qn, p.B, p.T, static_cast<int>(p.H), s));
    ATTNKIT_RETURN_IF_ERROR(gdn_cuda::launch_l2norm(k, kn, p.B, p.T, static_cast<int>(p.H), s));
    q = qn;
    k = kn;
  }
  Tok gcum;
  gcum.p = scratch.at<char>(gc_off);
  gcum.dt = 0;
  gcum.sh = 1;
  gcum.st = HVp;
  gcum.sb = p.T * HVp;
  const Tok pm = contiguous(p_off, p.HV, kGdnChunk);  // P = tril(Q K^T (.) Gamma)
  Tok w, u, tu;
  if (sm90) {
    tu = contiguous(t_off, p.HV, kGdnChunk);  // C = T diag(beta)
  } else {
    w = contiguous(w_off, p.HV, D);
    u = contiguous(u_off, p.HV, D);
  }

  gdn_cuda::IntraParams ip;
  ip.k = k;
  ip.v = tok(a.v);
  ip.beta = tok(a.beta);
  ip.g = tok(a.g);
  ip.g_cum_out = gcum;
  ip.w = w;
  ip.u = u;
  ip.t_out = tu;
  ip.q = q;
  ip.p_out = pm;
  ip.H = static_cast<int>(p.H);
  ip.HV = static_cast<int>(p.HV);
  ATTNKIT_RETURN_IF_ERROR(run_intra_forward(p.dtype, ip, call, p.device.index, kernels));

  gdn_cuda::StateOutParams sp;
  sp.q = q;
  sp.k = k;
  sp.w = w;
  sp.u = u;
  sp.tu = tu;
  sp.v = ip.v;
  sp.pm = pm;
  sp.g_cum = gcum;
  sp.o = tok(a.o);
  sp.init = state(a.initial_state);
  sp.fin = state(a.final_state);
  if (a.state_indices.defined()) {  // pools: sequence n's states are row state_indices[n]
    for (gdn_cuda::StateT* st : {&sp.init, &sp.fin}) {
      st->slots = static_cast<const int32_t*>(a.state_indices.data);
      st->slot_stride = a.state_indices.stride[0];
    }
  }
  sp.H = ip.H;
  sp.HV = ip.HV;
  sp.scale = p.scale;
  return run_state_output(p.dtype, sp, call, kernels);
}

Status cuda_gdn_decode_step(const GdnDecodeArgs& a, const GdnDecodeProblem& p, const ExecOptions& opts,
                            const GdnKernels& kernels) {
  if (p.K != kGdnGpuHeadDim || p.V != kGdnGpuHeadDim)
    return Status::Unsupported("gdn_decode_step: the CUDA kernel needs K = V = 128");
  // A key-last pool ([P, HV, V, K] passed transposed) has its K dim contiguous: its float4 rows run
  // along K, so the alignment check is on the view with the last two dims swapped back.
  const bool key_last = a.state_pool.stride[3] != 1;
  TensorView rows = a.state_pool;
  if (key_last) {
    std::swap(rows.shape[2], rows.shape[3]);
    std::swap(rows.stride[2], rows.stride[3]);
  }
  ATTNKIT_RETURN_IF_ERROR(require_vector_aligned(rows, "state_pool"));
  DeviceGuard guard(p.device.index);
  if (!guard.ok())
    return Status::Cuda("gdn_decode_step: cannot select CUDA device " + std::to_string(p.device.index));
  gdn_cuda::DecodeParams dp;
  dp.q = tok(a.q);
  dp.k = tok(a.k);
  dp.v = tok(a.v);
  dp.o = tok(a.o);
  dp.fused_gating = p.fused_gating;
  if (p.fused_gating) {  // b in beta's place: the kernels' beta type is b's (a has it too)
    dp.a = tok(a.a);
    dp.beta = tok(a.b);
    dp.A_log = static_cast<const float*>(a.A_log.data);
    dp.dt_bias = static_cast<const float*>(a.dt_bias.data);
  } else {
    dp.g = tok(a.g);
    dp.beta = tok(a.beta);
  }
  // One-token tensors are [N, heads, (inner)]: the head stride is dim 1 and the token stride 0.
  // With T tokens they are [N, T, heads, (inner)], as tok() reads them.
  if (!p.multi_token) {
    for (Tok* t : {&dp.q, &dp.k, &dp.v, &dp.g, &dp.beta, &dp.a, &dp.o}) {
      t->sh = t->st;
      t->st = 0;
    }
  }
  dp.pool = state(a.state_pool);
  dp.indices = static_cast<const int32_t*>(a.state_indices.data);
  dp.idx_stride = a.state_indices.stride[0];
  dp.N = static_cast<int>(p.N);
  dp.H = static_cast<int>(p.H);
  dp.HV = static_cast<int>(p.HV);
  dp.scale = p.scale;
  dp.l2norm = p.use_qk_l2norm;
  const cudaStream_t stream = static_cast<cudaStream_t>(opts.stream);
  dp.T = static_cast<int>(p.T);
  dp.update_pool = p.update_pool;
  if (a.step_states.defined()) {  // [N, T, HV, K, V]: its [N, HV, K, V] states plus the token dim
    dp.steps = state(drop_dim(a.step_states, 1));
    dp.steps_st = a.step_states.stride[1];
  }
  if (p.multi_token || a.step_states.defined() || !p.update_pool)
    return gdn_cuda::launch_decode_multi(dp, stream);
  if (key_last) return gdn_cuda::launch_decode_key_last(dp, stream);
  CudaDeviceInfo d;
  ATTNKIT_RETURN_IF_ERROR(cuda_device_info(p.device.index, &d));
  // The ring walks whole states, one CTA per SM: with fewer states than SMs most SMs idle, and
  // the register kernel's 64-column items put twice as many CTAs to work. Measured (HV = 32,
  // gdn_bench decode-sweep): the register kernel faster below one state per SM, the ring above.
  const bool ring = use_sm90(d, kernels) && (p.N * p.HV >= d.sm_count || kernels.decode_ring);
  return ring ? gdn_cuda::launch_decode_sm90(dp, stream) : gdn_cuda::launch_decode(dp, stream);
}

}  // namespace attnkit::detail
