// Small kernels of the chunked pipeline: the GPU-side chunk offsets of a ragged batch (so the host
// never reads cu_seqlens), q/k L2 normalisation, and the chunk-local gate cumsum (stage 1 alone).
#include <cub/block/block_scan.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {
namespace {

constexpr int kScanThreads = 1024;

// chunk_off[n] = sum over m < n of ceil(len_m / 64), lengths from clamped cu_seqlens.
__global__ void __launch_bounds__(kScanThreads) chunk_offsets_kernel(const int32_t* cu, int N, int64_t T,
                                                                     int32_t* chunk_off) {
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  SeqLayout L;
  L.cu = cu;
  L.T = T;
  L.N = N;
  L.varlen = 1;
  int carry = 0;
  for (int base = 0; base < N; base += kScanThreads) {
    const int n = base + threadIdx.x;
    int c = 0;
    if (n < N) {
      int64_t s, e;
      seq_rows(L, n, &s, &e);
      c = static_cast<int>((e - s + kChunk - 1) / kChunk);
    }
    int excl, total;
    Scan(tmp).ExclusiveSum(c, excl, total);
    if (n < N) chunk_off[n] = carry + excl;
    carry += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) chunk_off[N] = carry;
}

// One warp per (row, head) of 128 elements.
template <typename T>
__global__ void l2norm_kernel(Tok in, Tok out, int64_t rows_total, int64_t T_, int H) {
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= rows_total) return;
  const int h = static_cast<int>(w % H);
  const int64_t bt = w / H, b = bt / T_, t = bt % T_;
  const T* src = static_cast<const T*>(in.p) + b * in.sb + t * in.st + h * in.sh + lane * 4;
  T* dst = static_cast<T*>(out.p) + b * out.sb + t * out.st + h * out.sh + lane * 4;
  float x[4], ss = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[i] = to_f(src[i]);
    ss += x[i] * x[i];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float r = rsqrtf(ss + 1e-6f);
#pragma unroll
  for (int i = 0; i < 4; ++i) dst[i] = from_f<T>(x[i] * r);
}

// One warp per (chunk, head): two tokens per lane, warp-wide inclusive scan.
__global__ void cumsum_kernel(CumsumParams p, SeqLayout L, int64_t max_chunks) {
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= max_chunks * p.HV) return;
  const int hv = static_cast<int>(w % p.HV);
  ChunkPos c;
  if (!locate_chunk(L, w / p.HV, &c)) return;
  const int64_t base_in = c.batch * p.g.sb + c.row0 * p.g.st + hv * p.g.sh;
  const int64_t base_out = c.batch * p.g_cum.sb + c.row0 * p.g_cum.st + hv * p.g_cum.sh;
  const int i0 = 2 * lane, i1 = 2 * lane + 1;
  const float a = i0 < c.len ? ld_any(p.g.p, 0, base_in + i0 * p.g.st) : 0.f;
  const float b = i1 < c.len ? ld_any(p.g.p, 0, base_in + i1 * p.g.st) : 0.f;
  float s = a + b;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, s, o);
    if (lane >= o) s += y;
  }
  const float excl = s - (a + b);
  if (i0 < c.len) st_any(p.g_cum.p, 0, base_out + i0 * p.g_cum.st, excl + a);
  if (i1 < c.len) st_any(p.g_cum.p, 0, base_out + i1 * p.g_cum.st, s);
}

}  // namespace

Status launch_chunk_offsets(const SeqArgs& seq, int32_t* chunk_off, cudaStream_t s) {
  chunk_offsets_kernel<<<1, kScanThreads, 0, s>>>(seq.cu, seq.N, seq.T, chunk_off);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn chunk offsets");
  return Status::Ok();
}

Status launch_l2norm(const Tok& in, const Tok& out, int64_t B, int64_t T, int H, cudaStream_t s) {
  const int64_t rows = B * T * H;
  if (rows == 0) return Status::Ok();
  const int threads = 256;
  const int64_t blocks = (rows * 32 + threads - 1) / threads;
  if (in.dt == 2)
    l2norm_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), threads, 0, s>>>(in, out, rows, T, H);
  else
    l2norm_kernel<__half><<<static_cast<unsigned>(blocks), threads, 0, s>>>(in, out, rows, T, H);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn l2norm");
  return Status::Ok();
}

Status launch_cumsum(const CumsumParams& p, const SeqArgs& seq, const int32_t* chunk_off,
                     cudaStream_t s) {
  const int64_t warps = seq.max_chunks * p.HV;
  if (warps == 0) return Status::Ok();
  SeqLayout L;
  L.cu = seq.cu;
  L.chunk_off = chunk_off;
  L.T = seq.T;
  L.N = seq.N;
  L.varlen = seq.cu != nullptr;
  const int threads = 256;
  cumsum_kernel<<<static_cast<unsigned>((warps * 32 + threads - 1) / threads), threads, 0, s>>>(
      p, L, seq.max_chunks);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn cumsum");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
