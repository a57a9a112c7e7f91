// Device helpers shared by the Gated DeltaNet kernels: element access by runtime dtype (the
// intermediates of the stage ops may be fp32 or 16-bit), mma.sync m16n8k16 fragments, and the
// chunk -> sequence mapping computed on the GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/gdn/gdn_kernels.h"


namespace attnkit::gdn_cuda {

inline constexpr int kChunk = 64;
inline constexpr int kHead = 128;  // K = V = 128

// DType codes as in attnkit::DType: 0 fp32, 1 fp16, 2 bf16.
__device__ __forceinline__ float ld_any(const void* p, int dt, int64_t i) {
  if (dt == 0) return static_cast<const float*>(p)[i];
  if (dt == 1) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void st_any(void* p, int dt, int64_t i, float v) {
  if (dt == 0) static_cast<float*>(p)[i] = v;
  else if (dt == 1) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }

// Element i of a tensor whose type the kernel knows at compile time. ld_any's branch on a run-time
// dtype converts right after each load, so every such load waits for its data where it is issued;
// a typed load is waited for only where its value is used (the decode kernels prefetch with these).
template <typename T>
__device__ __forceinline__ float ld_typed(const void* p, int64_t i) {
  return to_f(static_cast<const T*>(p)[i]);
}

// The decode step's token element types as types: fn(T{}, TB{}) with T the q/k/v/o type (fp32,
// fp16 or bf16) and TB beta's (fp32 or T).
template <typename Fn>
auto with_decode_types(const DecodeParams& p, Fn&& fn) {
  auto by_beta = [&](auto t) {
    using T = decltype(t);
    return p.beta.dt == 0 ? fn(t, float{}) : fn(t, T{});
  };
  if (p.q.dt == 0) return fn(float{}, float{});
  if (p.q.dt == 1) return by_beta(__half{});
  return by_beta(__nv_bfloat16{});
}

// The decode step's gate inputs for (sequence n, token t, head hv), loaded early: g and beta, or
// under fused gating a, b, A_log and dt_bias. step_gates turns them into (exp(g), beta) where they
// are used, so the kernels that prefetch the next item wait for these loads only there. One-token
// calls have token stride 0 (t = 0).
struct GateIn {
  float x, y;               // g and beta, or a and b
  float a_log = 0.f, dt_bias = 0.f;
};
template <typename TB>
__device__ __forceinline__ GateIn load_gates(const DecodeParams& p, int64_t n, int t, int hv) {
  const float y = ld_typed<TB>(p.beta.p, n * p.beta.sb + t * p.beta.st + hv * p.beta.sh);
  if (!p.fused_gating) return {ld_typed<float>(p.g.p, n * p.g.sb + t * p.g.st + hv * p.g.sh), y};
  return {ld_typed<TB>(p.a.p, n * p.a.sb + t * p.a.st + hv * p.a.sh), y, p.A_log[hv],
          p.dt_bias[hv]};
}
// (decay, beta) of the step: g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b) under fused
// gating, softplus taken as linear above 20 (gdn.h).
__device__ __forceinline__ float2 step_gates(const DecodeParams& p, const GateIn& in) {
  if (!p.fused_gating) return {__expf(in.x), in.y};
  const float x = in.x + in.dt_bias;
  const float softplus = x > 20.f ? x : log1pf(expf(x));
  return {__expf(-expf(in.a_log) * softplus), 1.f / (1.f + expf(-in.y))};
}

// The decode step's two column reductions, S^T k and S^T q, over a state slice held as float4
// rows: each thread adds its rows into four columns' partials (add_state_row), then the lanes that
// hold the same columns, kColGroups apart in the warp, sum their partials (sum_over_row_lanes).
__device__ __forceinline__ void add_state_row(const float4& s, float kr, float qr, float (&pk)[4],
                                              float (&pq)[4]) {
  const float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    pk[c] += v[c] * kr;
    pq[c] += v[c] * qr;
  }
}
template <int kColGroups>
__device__ __forceinline__ void sum_over_row_lanes(float (&pk)[4], float (&pq)[4]) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
#pragma unroll
    for (int o = kColGroups; o < 32; o <<= 1) {
      pk[c] += __shfl_xor_sync(0xffffffffu, pk[c], o);
      pq[c] += __shfl_xor_sync(0xffffffffu, pq[c], o);
    }
  }
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(T lo, T hi) {
  uint16_t a, b;
  a = *reinterpret_cast<uint16_t*>(&lo);
  b = *reinterpret_cast<uint16_t*>(&hi);
  return static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 16);
}

// D += A(16x16, row) * B(16x8, col), fp32 accumulate.
template <typename T>
__device__ __forceinline__ void mma16816(float* d, const uint32_t* a, const uint32_t* b);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Fragment loaders from shared memory. Lane layout of m16n8k16: g = lane / 4, t = lane % 4.
// A row-major in smem (A[r][c] at p[r * ld + c]): pairs along c are adjacent, one 32-bit load each.
template <typename T>
__device__ __forceinline__ void load_a_row(uint32_t* a, const T* p, int ld, int r0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const T* base = p + (r0 + g) * ld + k0 + 2 * t;
  a[0] = *reinterpret_cast<const uint32_t*>(base);
  a[1] = *reinterpret_cast<const uint32_t*>(base + 8 * ld);
  a[2] = *reinterpret_cast<const uint32_t*>(base + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(base + 8 * ld + 8);
}
// A given transposed in smem: A[r][c] = p[c * ld + r].
template <typename T>
__device__ __forceinline__ void load_a_trans(uint32_t* a, const T* p, int ld, int r0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int r = r0 + g, c = k0 + 2 * t;
  a[0] = pack2(p[c * ld + r], p[(c + 1) * ld + r]);
  a[1] = pack2(p[c * ld + r + 8], p[(c + 1) * ld + r + 8]);
  a[2] = pack2(p[(c + 8) * ld + r], p[(c + 9) * ld + r]);
  a[3] = pack2(p[(c + 8) * ld + r + 8], p[(c + 9) * ld + r + 8]);
}
// B[k][n] stored as p[n * ld + k] ("col" operand, e.g. K rows for Q K^T): pairs adjacent.
template <typename T>
__device__ __forceinline__ void load_b_nk(uint32_t* b, const T* p, int ld, int k0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const T* base = p + (n0 + g) * ld + k0 + 2 * t;
  b[0] = *reinterpret_cast<const uint32_t*>(base);
  b[1] = *reinterpret_cast<const uint32_t*>(base + 8);
}
// B[k][n] stored as p[k * ld + n] (row-major K x N, e.g. a state or V tile).
template <typename T>
__device__ __forceinline__ void load_b_kn(uint32_t* b, const T* p, int ld, int k0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int n = n0 + g, k = k0 + 2 * t;
  b[0] = pack2(p[k * ld + n], p[(k + 1) * ld + n]);
  b[1] = pack2(p[(k + 8) * ld + n], p[(k + 9) * ld + n]);
}

// ldmatrix-based loaders (16-byte aligned rows). ATTNKIT_GDN_NO_LDMATRIX selects the scalar
// gathers above instead, as a cross-check.
// Two adjacent n-tiles (n0, n0 + 8) of B[k][n] stored row-major p[k * ld + n]: b[0..1], b[2..3].
template <typename T>
__device__ __forceinline__ void load_b_kn_x2(uint32_t* b, const T* p, int ld, int k0, int n0, int lane) {
#ifdef ATTNKIT_GDN_NO_LDMATRIX
  load_b_kn(b, p, ld, k0, n0, lane);
  load_b_kn(b + 2, p, ld, k0, n0 + 8, lane);
#else
  const int q = lane >> 3, r = lane & 7;
  const T* a = p + (k0 + (q & 1) * 8 + r) * ld + n0 + (q >> 1) * 8;
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(s));
#endif
}
// One n-tile of B[k][n] stored row-major p[k * ld + n].
template <typename T>
__device__ __forceinline__ void load_b_kn_x1(uint32_t* b, const T* p, int ld, int k0, int n0, int lane) {
#ifdef ATTNKIT_GDN_NO_LDMATRIX
  load_b_kn(b, p, ld, k0, n0, lane);
#else
  const T* a = p + (k0 + (lane & 15)) * ld + n0;
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(s));
#endif
}
// A[m][kk] stored row-major p[m * ld + kk] (as load_a_row), one ldmatrix.x4.
template <typename T>
__device__ __forceinline__ void load_a_row_lm(uint32_t* a, const T* p, int ld, int m0, int k0, int lane) {
#ifdef ATTNKIT_GDN_NO_LDMATRIX
  load_a_row(a, p, ld, m0, k0, lane);
#else
  const int q = lane >> 3, r = lane & 7;
  const T* ad = p + (m0 + (q & 1) * 8 + r) * ld + k0 + (q >> 1) * 8;
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(ad));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(s));
#endif
}
// Two adjacent n-tiles (n0, n0 + 8) of B[k][n] stored as p[n * ld + k] (as load_b_nk): b[0..1], b[2..3].
template <typename T>
__device__ __forceinline__ void load_b_nk_x2(uint32_t* b, const T* p, int ld, int k0, int n0, int lane) {
#ifdef ATTNKIT_GDN_NO_LDMATRIX
  load_b_nk(b, p, ld, k0, n0, lane);
  load_b_nk(b + 2, p, ld, k0, n0 + 8, lane);
#else
  const int q = lane >> 3, r = lane & 7;
  const T* ad = p + (n0 + (q >> 1) * 8 + r) * ld + k0 + (q & 1) * 8;
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(ad));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(s));
#endif
}
// A[m][kk] stored transposed p[kk * ld + m].
template <typename T>
__device__ __forceinline__ void load_a_trans_lm(uint32_t* a, const T* p, int ld, int m0, int k0, int lane) {
#ifdef ATTNKIT_GDN_NO_LDMATRIX
  load_a_trans(a, p, ld, m0, k0, lane);
#else
  const int q = lane >> 3, r = lane & 7;
  const T* ad = p + (k0 + (q >> 1) * 8 + r) * ld + m0 + (q & 1) * 8;
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(ad));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(s));
#endif
}

// Where a 64-token chunk lies. Sequences: dense (n = batch entry, T rows each) or ragged
// (cu_seqlens, batch entry 0). chunk_off (device, [N + 1]) holds each sequence's first global
// chunk; it is computed on the GPU from clamped cu_seqlens (gdn_chunk_offsets_kernel).
struct SeqLayout {
  const int32_t* cu = nullptr;         // ragged only
  const int32_t* chunk_off = nullptr;  // ragged only
  int64_t T = 0;                       // rows per batch entry
  int N = 0;                           // sequences
  int varlen = 0;
};

struct ChunkPos {
  int n;          // sequence
  int64_t batch;  // batch entry
  int64_t row0;   // first row of the chunk in its batch entry
  int len;        // valid rows (1..64)
  int64_t seq_start, seq_end;  // rows of the sequence
};

__device__ __forceinline__ int64_t clamp_row(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

// Sequence n's rows, with cu_seqlens clamped into [0, T] and made non-decreasing so a malformed
// device tensor can never send a kernel out of bounds.
__device__ __forceinline__ void seq_rows(const SeqLayout& L, int n, int64_t* s, int64_t* e) {
  if (!L.varlen) {
    *s = 0;
    *e = L.T;
    return;
  }
  const int64_t a = clamp_row(L.cu[n], 0, L.T);
  *s = a;
  *e = clamp_row(L.cu[n + 1], a, L.T);
}

__device__ __forceinline__ int64_t chunks_per_dense_seq(int64_t T) { return (T + kChunk - 1) / kChunk; }

__device__ __forceinline__ int64_t seq_first_chunk(const SeqLayout& L, int n) {
  return L.varlen ? L.chunk_off[n] : static_cast<int64_t>(n) * chunks_per_dense_seq(L.T);
}

// False when global chunk c belongs to no sequence (the grid is sized by an upper bound).
__device__ __forceinline__ bool locate_chunk(const SeqLayout& L, int64_t c, ChunkPos* p) {
  int n;
  if (!L.varlen) {
    const int64_t cps = chunks_per_dense_seq(L.T);
    if (cps == 0) return false;
    n = static_cast<int>(c / cps);
    if (n >= L.N) return false;
  } else {
    if (c >= L.chunk_off[L.N]) return false;
    int lo = 0, hi = L.N - 1;  // last n with chunk_off[n] <= c
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (L.chunk_off[mid] <= c) lo = mid; else hi = mid - 1;
    }
    n = lo;
  }
  int64_t s, e;
  seq_rows(L, n, &s, &e);
  p->n = n;
  p->batch = L.varlen ? 0 : n;
  p->row0 = s + (c - seq_first_chunk(L, n)) * kChunk;
  const int64_t left = e - p->row0;
  if (left <= 0) return false;
  p->len = static_cast<int>(left < kChunk ? left : kChunk);
  p->seq_start = s;
  p->seq_end = e;
  return true;
}

}  // namespace attnkit::gdn_cuda

namespace attnkit::gdn_cuda {

template <typename T> struct DtCode;
template <> struct DtCode<__nv_bfloat16> { static constexpr int value = 2; };
template <> struct DtCode<__half> { static constexpr int value = 1; };

// cp.async (sm_80+): 16-byte global -> shared copies that zero-fill when !valid, so many tile
// loads are in flight at once instead of one latency per loop trip.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
// Completes every copy this thread issued; a __syncthreads must follow before others read them.
__device__ __forceinline__ void cp_async_wait_all() {
  cp_async_commit();
  cp_async_wait<0>();
}

// Copies `rows` rows of `cols` elements (row r at src + base + r * row_stride, any dtype) into a
// 16-bit smem tile with leading dim ld; rows >= rows_valid become zeros. Same-dtype sources move
// by 16-byte cp.async (the adapters check alignment): call cp_async_wait_all() (or commit and
// wait on the group) before the barrier that publishes the tile.
template <typename T>
__device__ __forceinline__ void load_tile(T* dst, int ld, const void* src, int dt, int64_t base,
                                          int64_t row_stride, int rows_valid, int rows, int cols) {
  if (dt == DtCode<T>::value) {
    const int vpr = cols / 8;
    for (int i = threadIdx.x; i < rows * vpr; i += blockDim.x) {
      const int r = i / vpr, c = (i % vpr) * 8;
      const T* g = static_cast<const T*>(src) + base + (r < rows_valid ? r * row_stride + c : 0);
      cp_async16(dst + r * ld + c, g, r < rows_valid);
    }
  } else {
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
      const int r = i / cols, c = i % cols;
      const float x = r < rows_valid ? ld_any(src, dt, base + r * row_stride + c) : 0.f;
      dst[r * ld + c] = from_f<T>(x);
    }
  }
}

__device__ __forceinline__ void load_tile_f32(float* dst, int ld, const void* src, int dt, int64_t base,
                                              int64_t row_stride, int rows_valid, int rows, int cols) {
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    dst[r * ld + c] = r < rows_valid ? ld_any(src, dt, base + r * row_stride + c) : 0.f;
  }
}

// Splits x into hi + lo 16-bit parts, so two mma's give ~fp32-accurate products with an exact
// 16-bit operand.
template <typename T>
__device__ __forceinline__ void split_hi_lo(float x, T* hi, T* lo) {
  const T h = from_f<T>(x);
  *hi = h;
  *lo = from_f<T>(x - to_f(h));
}

// Pair store of an accumulator (two adjacent columns) to any dtype; one 4/8-byte store when aligned.
__device__ __forceinline__ void st_pair(void* p, int dt, int64_t i, float a, float b) {
  if (dt == 2 && (i & 1) == 0 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p) + i) = __floats2bfloat162_rn(a, b);
  } else if (dt == 1 && (i & 1) == 0 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    *reinterpret_cast<__half2*>(static_cast<__half*>(p) + i) = __floats2half2_rn(a, b);
  } else if (dt == 0 && (i & 1) == 0 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    *reinterpret_cast<float2*>(static_cast<float*>(p) + i) = make_float2(a, b);
  } else {
    st_any(p, dt, i, a);
    st_any(p, dt, i + 1, b);
  }
}


// 4 x 4 transpose of 32-bit words inside each 4-lane quad: lane t's x[j] goes to lane j's x[t].
// Every lane of the warp must call it (shuffles).
__device__ __forceinline__ void quad_transpose(uint32_t (&x)[4], int t) {
  {
    const bool hi = t & 1;
    const uint32_t s0 = __shfl_xor_sync(0xffffffffu, hi ? x[0] : x[1], 1);
    const uint32_t s1 = __shfl_xor_sync(0xffffffffu, hi ? x[2] : x[3], 1);
    if (hi) { x[0] = s0; x[2] = s1; } else { x[1] = s0; x[3] = s1; }
  }
  {
    const bool hi = t & 2;
    const uint32_t s0 = __shfl_xor_sync(0xffffffffu, hi ? x[0] : x[2], 2);
    const uint32_t s1 = __shfl_xor_sync(0xffffffffu, hi ? x[1] : x[3], 2);
    if (hi) { x[0] = s0; x[1] = s1; } else { x[2] = s0; x[3] = s1; }
  }
}

// Four adjacent n-tiles (32 columns) of an m16n8 accumulator, v[j] for n-tile j, stored to 16-bit
// rows r0 = g and r1 = g + 8 as whole 16-byte pieces: after a quad transpose lane t holds columns
// 8 t .. 8 t + 7, so each row leaves as two full 32-byte sectors instead of eight half-used ones.
// row0 / row1 point at the group's first column in rows r0 / r1 (16-byte aligned); every lane of
// the warp must call it, with ok0 / ok1 saying whether its rows are to be written.
template <typename T>
__device__ __forceinline__ void store_acc_rows16(T* row0, T* row1, const float (*v)[4], bool ok0, bool ok1,
                                                 int t) {
  uint32_t a[4], b[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    a[j] = pack2(from_f<T>(v[j][0]), from_f<T>(v[j][1]));
    b[j] = pack2(from_f<T>(v[j][2]), from_f<T>(v[j][3]));
  }
  quad_transpose(a, t);
  quad_transpose(b, t);
  if (ok0) *reinterpret_cast<uint4*>(row0 + 8 * t) = make_uint4(a[0], a[1], a[2], a[3]);
  if (ok1) *reinterpret_cast<uint4*>(row1 + 8 * t) = make_uint4(b[0], b[1], b[2], b[3]);
}

// Whether a token tensor of dtype T can take 16-byte stores at every (batch, row, head) base and
// multiple-of-8 column.
template <typename T>
__device__ __forceinline__ bool tok_vec16(const Tok& x) {
  return x.dt == DtCode<T>::value && (reinterpret_cast<uintptr_t>(x.p) & 15) == 0 && x.sb % 8 == 0 &&
         x.st % 8 == 0 && x.sh % 8 == 0;
}


__host__ __device__ inline SeqLayout make_layout(const int32_t* cu, const int32_t* chunk_off, int64_t T, int N) {
  SeqLayout L;
  L.cu = cu;
  L.chunk_off = chunk_off;
  L.T = T;
  L.N = N;
  L.varlen = cu != nullptr;
  return L;
}

}  // namespace attnkit::gdn_cuda
