// Gated DeltaNet forward with each sequence's chunk chain split into segments that run in
// parallel (GdnKernels::segments): every token maps the state S to (exp(g) I - beta k k^T) S +
// beta k v^T, so a segment maps the state it starts from to S_out = M S_in + B. Three batched
// forwards over the segments as sequences and one scan:
//   1. from zero states with the real v:         the segments' B (their final states);
//   2. from identity states with v = 0:          the segments' M;
//   3. scan per (sequence, value head):          E_0 = initial, E_{s+1} = M_s E_s + B_s,
//                                                the last E is the final state;
//   4. from the entry states E_s with the real v: the outputs.
// Each forward's chain is a segment long, so a few long sequences fill the GPU; the work is about
// three forwards. Needs the sequence layout on the host and B = 1 (dense or ragged).
#include <algorithm>
#include <vector>

#include "api/gdn_backends.h"
#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_views.h"

namespace attnkit::detail {
namespace {

using gdn_cuda::kHead;

// Identity K x K states: [rows, HV, K, K], contiguous.
__global__ void fill_identity(float* m, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) m[i] = (i / kHead) % kHead == i % kHead ? 1.f : 0.f;
}

constexpr int kScanCols = 32;  // value columns per CTA
constexpr int kScanThreads = 256;

// One (sequence, value head, 32-column block): walks the sequence's segments, writing each entry
// state and composing E <- M_s E + B_s, then writes the final state (when given). M, B and the
// entry states are contiguous [S, HV, K, ...]; init / fin are StateT views (any layout).
__global__ void __launch_bounds__(kScanThreads)
    scan_segments(const float* M, const float* B, float* entry, gdn_cuda::StateT init,
                  gdn_cuda::StateT fin, const int32_t* seg_begin, int HV) {
  __shared__ float E[kHead][kScanCols];
  const int hv = blockIdx.x, n = blockIdx.y, c0 = blockIdx.z * kScanCols, tid = threadIdx.x;
  for (int i = tid; i < kHead * kScanCols; i += kScanThreads) {
    const int r = i / kScanCols, c = i % kScanCols;
    E[r][c] = init.defined() ? static_cast<const float*>(init.p)[init.at(n, hv, r, c0 + c)] : 0.f;
  }
  __syncthreads();
  constexpr int kPer = kHead * kScanCols / kScanThreads;  // entries per thread
  for (int s = seg_begin[n]; s < seg_begin[n + 1]; ++s) {
    const int64_t base_v = (static_cast<int64_t>(s) * HV + hv) * kHead * kHead;  // V = K = 128
    float* ent = entry + base_v;
    float acc[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int i = tid + e * kScanThreads, r = i / kScanCols, c = i % kScanCols;
      ent[r * kHead + c0 + c] = E[r][c];
      float x = B[base_v + r * kHead + c0 + c];
      const float* m = M + base_v + r * kHead;  // row r of M_s (K = 128 columns)
      for (int k = 0; k < kHead; ++k) x += m[k] * E[k][c];
      acc[e] = x;
    }
    __syncthreads();  // every reader of E is done
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int i = tid + e * kScanThreads;
      E[i / kScanCols][i % kScanCols] = acc[e];
    }
    __syncthreads();
  }
  if (!fin.defined()) return;
  for (int i = tid; i < kHead * kScanCols; i += kScanThreads) {
    const int r = i / kScanCols, c = i % kScanCols;
    static_cast<float*>(fin.p)[fin.at(n, hv, r, c0 + c)] = E[r][c];
  }
}

// Stream-ordered device buffers freed when this goes out of scope.
class Buffers {
 public:
  explicit Buffers(cudaStream_t s) : s_(s) {}
  ~Buffers() {
    for (void* p : owned_) cudaFreeAsync(p, s_);
  }
  template <class T>
  Status alloc(size_t n, T** out) {
    void* p = nullptr;
    ATTNKIT_CUDA_TRY(cudaMallocAsync(&p, std::max<size_t>(n, 1) * sizeof(T), s_));
    owned_.push_back(p);
    *out = static_cast<T*>(p);
    return Status::Ok();
  }

 private:
  cudaStream_t s_;
  std::vector<void*> owned_;
};

}  // namespace

Status cuda_gdn_chunk_forward_split(const GdnChunkArgs& a, const GdnProblem& p,
                                    const ExecOptions& opts, const GdnKernels& kernels) {
  if (!p.indices_on_host || p.B != 1 || p.state_slots || p.N > 65535)
    return Status::Unsupported("gdn_chunk_forward: segments need B = 1 (dense or ragged), the "
                               "sequence layout on the host, at most 65535 sequences and no "
                               "state_indices");
  const cudaStream_t s = static_cast<cudaStream_t>(opts.stream);
  // Segment boundaries: each sequence cut into up to `segments` pieces at chunk multiples.
  std::vector<int32_t> cu{0}, seg_begin{0};
  for (int64_t n = 0; n < p.N; ++n) {
    const int64_t len = p.seq_len[n], chunks = (len + kGdnChunk - 1) / kGdnChunk;
    const int64_t pieces = std::max<int64_t>(1, std::min<int64_t>(kernels.segments, chunks));
    for (int64_t i = 0; i < pieces; ++i) {
      const int64_t end = i + 1 == pieces ? len : (chunks * (i + 1) / pieces) * kGdnChunk;
      cu.push_back(static_cast<int32_t>(p.seq_start[n] + end));
    }
    seg_begin.push_back(static_cast<int32_t>(cu.size() - 1));
  }
  const int64_t S = static_cast<int64_t>(cu.size()) - 1, HV = p.HV, K = p.K, T = p.T;
  const int64_t per_state = HV * K * K;  // K = V = 128 on CUDA
  Buffers buf(s);
  int32_t *dcu = nullptr, *dbegin = nullptr;
  float *m = nullptr, *b = nullptr, *eye = nullptr, *entry = nullptr;
  void* zeros = nullptr;
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(cu.size(), &dcu));
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(seg_begin.size(), &dbegin));
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(S * per_state, &m));
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(S * per_state, &b));
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(S * per_state, &eye));
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(S * per_state, &entry));
  char* z = nullptr;
  ATTNKIT_RETURN_IF_ERROR(buf.alloc(static_cast<size_t>(T * HV * K) * 2, &z));
  zeros = z;
  ATTNKIT_CUDA_TRY(cudaMemcpyAsync(dcu, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice, s));
  ATTNKIT_CUDA_TRY(
      cudaMemcpyAsync(dbegin, seg_begin.data(), seg_begin.size() * 4, cudaMemcpyHostToDevice, s));
  ATTNKIT_CUDA_TRY(cudaMemsetAsync(zeros, 0, static_cast<size_t>(T * HV * K) * 2, s));
  const int64_t eye_n = S * per_state;
  fill_identity<<<static_cast<unsigned>((eye_n + 255) / 256), 256, 0, s>>>(eye, eye_n);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn split: identity states");

  GdnKernels one = kernels;
  one.segments = 0;
  ExecOptions inner = opts;
  inner.validate_device_indices = false;  // the segment boundaries are the library's own
  const Device dev = p.device;
  GdnChunkArgs seg = a;
  seg.cu_seqlens = make_view(dcu, DType::kInt32, {S + 1}, dev);
  seg.state_indices = {};
  // 1. B: from zeros with the real v (the outputs are rewritten by 4).
  seg.initial_state = {};
  seg.final_state = make_view(b, DType::kFloat32, {S, HV, K, K}, dev);
  ATTNKIT_RETURN_IF_ERROR(gdn_chunk_forward_with(seg, inner, one));
  // 2. M: from the identity with v = 0.
  seg.v = make_view(zeros, a.v.dtype, {1, T, HV, K}, dev);
  seg.initial_state = make_view(eye, DType::kFloat32, {S, HV, K, K}, dev);
  seg.final_state = make_view(m, DType::kFloat32, {S, HV, K, K}, dev);
  ATTNKIT_RETURN_IF_ERROR(gdn_chunk_forward_with(seg, inner, one));
  // 3. The entry states and the final states.
  const dim3 grid(static_cast<unsigned>(HV), static_cast<unsigned>(p.N),
                  static_cast<unsigned>(K / kScanCols));
  scan_segments<<<grid, kScanThreads, 0, s>>>(m, b, entry, state(a.initial_state),
                                              state(a.final_state), dbegin,
                                              static_cast<int>(HV));
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn split: scan");
  // 4. The outputs, each segment from its entry state.
  seg.v = a.v;
  seg.initial_state = make_view(entry, DType::kFloat32, {S, HV, K, K}, dev);
  seg.final_state = {};
  return gdn_chunk_forward_with(seg, inner, one);
}

}  // namespace attnkit::detail
