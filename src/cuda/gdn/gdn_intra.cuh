// Stages 1-3 of the chunked forward fused per (chunk, value head): gate cumsum, A = strict_lower(
// diag(beta)(K K^T (.) Gamma)), T = (I + A)^-1 in fp32, then W = T diag(beta exp(g)) K and
// U = T diag(beta) V. K K^T and the W/U products run on tensor cores; the W/U products split the
// fp32 T into hi + lo 16-bit halves so T keeps ~fp32 accuracy. For the whole forward it also
// writes P = tril(Q K^T (.) Gamma), the chunk output's intra-chunk term, so the sequential fused
// state/output kernel (gdn_state_output.cuh) only does the products that need the state. With
// t_out it writes C = T diag(beta) instead, the one matrix the sm90 state/output kernel needs
// (gdn_state_output_sm90.cuh).
//
// The inverse is blocked (16 x 16 blocks, all fp32 FMAs): warp b inverts the diagonal block
// (I + A_bb) by substitution, then the off-diagonal blocks come from the 2 x 2 block-inverse rule
// applied twice, spread over all eight warps (invert_unit_lower).
#pragma once

#include "cuda/gdn/gdn_device.cuh"
#include "cuda/gdn/gdn_kernels.h"

namespace attnkit::gdn_cuda {

// Eight warps: warp w owns rows 16 (w % 4) .. + 15 and one half of the columns of each product.
constexpr int kIntraThreads = 256;
constexpr int kIntraMinBlocks = 3;  // three CTAs per SM fit the shared memory
constexpr int kLdT = kHead + 8;    // 16-bit tile rows, padded against bank conflicts
constexpr int kLdA = kChunk + 4;   // fp32 A: the 8 rows a warp reads at once, and its mma-layout
                                   // stores, spread over the banks (at most 2-way on stores)
constexpr int kLdI = kChunk + 4;   // fp32 T: 16-byte rows for float4 reads, rows r, r + 8 apart
constexpr int kLdP = kChunk + 8;   // 16-bit 64 x 64
// The inverse reads A and T rows 4 floats at a time: 16-byte rows (and 16-byte aligned arrays).
static_assert(kLdA % 4 == 0 && kLdI % 4 == 0);

template <typename T>
struct IntraSmem {
  T ks[kChunk * kLdT];
  T vs[kChunk * kLdT];
  alignas(16) float tm[kChunk * kLdI];  // T = (I + A)^-1; the upper off-diagonal blocks: scratch
  // A is dead once T is built: the hi/lo halves of the scaled T reuse its bytes.
  union alignas(16) {
    float am[kChunk * kLdA];
    struct {
      T thi[kChunk * kLdP];
      T tlo[kChunk * kLdP];
    } p;
  } u;
  float gc[kChunk];
  float bt[kChunk];
  float cw[kChunk];  // beta exp(g): W's column scale of T
};

// thi/tlo = split(T diag(colscale)), two columns per step. A computed T is lower triangular (its
// upper blocks hold scratch, read as zeros); a given one is used as it is.
template <typename T>
__device__ __forceinline__ void split_scaled(IntraSmem<T>& sm, const float* colscale, bool given) {
  for (int i = threadIdx.x; i < kChunk * kChunk / 2; i += kIntraThreads) {
    const int r = i / (kChunk / 2), j = 2 * (i % (kChunk / 2));
    const float2 x = *reinterpret_cast<const float2*>(&sm.tm[r * kLdI + j]);
    const float x0 = (given || j <= r) ? x.x * colscale[j] : 0.f;
    const float x1 = (given || j + 1 <= r) ? x.y * colscale[j + 1] : 0.f;
    T h0, l0, h1, l1;
    split_hi_lo(x0, &h0, &l0);
    split_hi_lo(x1, &h1, &l1);
    *reinterpret_cast<uint32_t*>(&sm.u.p.thi[r * kLdP + j]) = pack2(h0, h1);
    *reinterpret_cast<uint32_t*>(&sm.u.p.tlo[r * kLdP + j]) = pack2(l0, l1);
  }
}

// One warp, 8 columns of a 16 x 16 fp32 product: d += sum over kb < nk of X(16 x 16 k-block kb) *
// Y(k-block kb, those 8 columns). X element (r, k) at x[r * ldx + k] (row-major), Y element (k, c)
// at y[k * ldy + c] (y pointing at the first of the 8 columns, 8-byte aligned; ldy even). Lane owns
// rows lr, lr + 8 and columns 2 lc, 2 lc + 1.
__device__ __forceinline__ void half_mac(float (&d)[2][2], const float* x, int ldx, const float* y, int ldy,
                                         int nk, int lane) {
  const int lr = lane >> 2, lc = lane & 3;
  for (int kb = 0; kb < nk; ++kb) {
#pragma unroll
    for (int k4 = 0; k4 < 16; k4 += 4) {
      // X's 4 consecutive k as one 16-byte load per row (8 rows 4 banks apart: no conflict).
      const float4 xa = *reinterpret_cast<const float4*>(x + lr * ldx + kb * 16 + k4);
      const float4 xb = *reinterpret_cast<const float4*>(x + (lr + 8) * ldx + kb * 16 + k4);
      const float x0[4] = {xa.x, xa.y, xa.z, xa.w}, x1[4] = {xb.x, xb.y, xb.z, xb.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 yv = *reinterpret_cast<const float2*>(y + (kb * 16 + k4 + e) * ldy + 2 * lc);
        d[0][0] = fmaf(x0[e], yv.x, d[0][0]);
        d[0][1] = fmaf(x0[e], yv.y, d[0][1]);
        d[1][0] = fmaf(x1[e], yv.x, d[1][0]);
        d[1][1] = fmaf(x1[e], yv.y, d[1][1]);
      }
    }
  }
}

// sc * d to the 16 x 8 block at dst (row stride ld), in half_mac's lane layout.
__device__ __forceinline__ void half_store(float* dst, int ld, const float (&d)[2][2], float sc, int lane) {
  const int lr = lane >> 2, lc = lane & 3;
  *reinterpret_cast<float2*>(dst + lr * ld + 2 * lc) = make_float2(sc * d[0][0], sc * d[0][1]);
  *reinterpret_cast<float2*>(dst + (lr + 8) * ld + 2 * lc) = make_float2(sc * d[1][0], sc * d[1][1]);
}

// The diagonal 16 x 16 blocks T_ii = (I + A_ii)^-1 of T = (I + A)^-1, by substitution: warps 0-3,
// warp w block w, lanes 0..15 one column each (A's rows read 4 floats at a time: `am` 16-byte
// aligned, kLA a multiple of 4). No barrier.
template <int kLA, int kLI>
__device__ __forceinline__ void invert_diag_blocks(const float* am, float* tm) {
  static_assert(kLA % 4 == 0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp < 4) {
    const int b0 = warp * 16, c = lane & 15;
    float x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      // Row i's first i entries, 4 at a time (16-byte loads; every lane reads the same row).
      float a[16];
#pragma unroll
      for (int j4 = 0; j4 < i; j4 += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&am[(b0 + i) * kLA + b0 + j4]);
        a[j4] = v.x, a[j4 + 1] = v.y, a[j4 + 2] = v.z, a[j4 + 3] = v.w;
      }
      float s = (i == c) ? 1.f : 0.f;
#pragma unroll
      for (int j = 0; j < i; ++j) s = fmaf(-a[j], x[j], s);
      x[i] = s;
    }
    if (lane < 16) {
#pragma unroll
      for (int i = 0; i < 16; ++i) tm[(b0 + i) * kLI + b0 + c] = x[i];
    }
  }
}

// T = (I + A)^-1 for the strictly lower 64 x 64 A in `am`, into `tm` (lower triangle and diagonal;
// upper off-diagonal blocks hold scratch). Eight warps; ends with a block-wide barrier.
//
// Blocks are 16 x 16 (T_ij, A_ij). The diagonal blocks T_ii = (I + A_ii)^-1 come by substitution;
// then the 2 x 2 block rule [L11 0; L21 L22]^-1 = [L11^-1 0; -L22^-1 L21 L11^-1, L22^-1], applied
// twice: level 1 builds T_10 = -T_11 A_10 T_00 and T_32 = -T_33 A_32 T_22, level 2 the lower-left
// 32 x 32 quarter, -T_LR (A_LL T_UL), through X = A_LL T_UL in the scratch blocks. Each warp owns
// 8 columns of an output block, so a product's inner factor stays within the warp. The longest
// chain is 6 block products of 16 x 8. It replaced a column walk (T_i0 = -T_ii sum_k A_ik T_k0: 9
// full 16 x 16 products in a row on one warp while five warps waited at the barrier), which
// measured slower.
__device__ __forceinline__ void invert_unit_lower(const float* am, float* tm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  invert_diag_blocks<kLdA, kLdI>(am, tm);
  __syncthreads();
  auto A = [&](int i, int j) { return am + 16 * i * kLdA + 16 * j; };
  auto T = [&](int i, int j) { return tm + 16 * i * kLdI + 16 * j; };
  const int h8 = 8 * (warp & 1);  // the warp's 8 columns within its output block
  float d[2][2] = {};
  if (warp < 4) {  // Level 1: T_{b+1,b}, b = 0 or 2, via M = A_{b+1,b} T_bb in scratch block (b, b+1).
    const int b = warp < 2 ? 0 : 2;
    half_mac(d, A(b + 1, b), kLdA, T(b, b) + h8, kLdI, 1, lane);
    half_store(T(b, b + 1) + h8, kLdI, d, 1.f, lane);
    __syncwarp();
    float e[2][2] = {};
    half_mac(e, T(b + 1, b + 1), kLdI, T(b, b + 1) + h8, kLdI, 1, lane);
    half_store(T(b + 1, b) + h8, kLdI, e, -1.f, lane);
  } else {  // X_i1 = A_i1 T_11 (i = 2, 3: the diagonal is all it needs) into scratch block (i - 2, 3).
    const int i = warp < 6 ? 2 : 3;
    half_mac(d, A(i, 1), kLdA, T(1, 1) + h8, kLdI, 1, lane);
    half_store(T(i - 2, 3) + h8, kLdI, d, 1.f, lane);
  }
  __syncthreads();
  float e[2][2] = {};
  if (warp < 4) {  // X_i0 = A_i0 T_00 + A_i1 T_10 (i = 2, 3) into scratch block (i - 2, 2).
    const int i = warp < 2 ? 2 : 3;
    half_mac(e, A(i, 0), kLdA, T(0, 0) + h8, kLdI, 2, lane);
    half_store(T(i - 2, 2) + h8, kLdI, e, 1.f, lane);
  } else if (warp < 6) {  // T_21 = -T_22 X_21
    half_mac(e, T(2, 2), kLdI, T(0, 3) + h8, kLdI, 1, lane);
    half_store(T(2, 1) + h8, kLdI, e, -1.f, lane);
  } else {  // T_31 = -(T_32 X_21 + T_33 X_31): X_21 and X_31 are column block 3's rows 0-31.
    half_mac(e, T(3, 2), kLdI, T(0, 3) + h8, kLdI, 2, lane);
    half_store(T(3, 1) + h8, kLdI, e, -1.f, lane);
  }
  __syncthreads();
  if (warp < 4) {  // T_20 = -T_22 X_20, T_30 = -(T_32 X_20 + T_33 X_30)
    float f[2][2] = {};
    const int i = warp < 2 ? 2 : 3;
    half_mac(f, T(i, 2), kLdI, T(0, 2) + h8, kLdI, i - 1, lane);
    half_store(T(i, 0) + h8, kLdI, f, -1.f, lane);
  }
  __syncthreads();
}

// out = Tmat(64x64, hi/lo in smem) * X (64 x 128 in smem), written to rows < len of `dst`.
template <typename T>
__device__ __forceinline__ void intra_product(const IntraSmem<T>& sm, const T* x, const Tok& dst,
                                              int64_t base, int len, bool lower) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = 16 * (warp & 3), col0 = 64 * (warp >> 2);
  float acc[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
  // A lower-triangular T has nothing right of the diagonal block (a given T is used whole).
  const int kend = lower ? (warp & 3) + 1 : kChunk / 16;
#pragma unroll
  for (int ks = 0; ks < kChunk / 16; ++ks) {
    if (ks >= kend) break;
    uint32_t ahi[4], alo[4];
    load_a_row_lm(ahi, sm.u.p.thi, kLdP, row0, ks * 16, lane);
    load_a_row_lm(alo, sm.u.p.tlo, kLdP, row0, ks * 16, lane);
#pragma unroll
    for (int nt = 0; nt < 8; nt += 2) {
      uint32_t b[4];
      load_b_kn_x2(b, x, kLdT, ks * 16, col0 + nt * 8, lane);
      mma16816<T>(acc[nt], ahi, b);
      mma16816<T>(acc[nt], alo, b);
      mma16816<T>(acc[nt + 1], ahi, b + 2);
      mma16816<T>(acc[nt + 1], alo, b + 2);
    }
  }
  const int r0 = row0 + g, r1 = r0 + 8;
  if (tok_vec16<T>(dst)) {  // uniform: 16-byte rows, full sectors
    T* const o = static_cast<T*>(dst.p) + base + col0;
#pragma unroll
    for (int grp = 0; grp < 2; ++grp)
      store_acc_rows16<T>(o + r0 * dst.st + 32 * grp, o + r1 * dst.st + 32 * grp,
                          &acc[4 * grp], r0 < len, r1 < len, t);
    return;
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = col0 + nt * 8 + 2 * t;
    if (r0 < len) st_pair(dst.p, dst.dt, base + r0 * dst.st + c, acc[nt][0], acc[nt][1]);
    if (r1 < len) st_pair(dst.p, dst.dt, base + r1 * dst.st + c, acc[nt][2], acc[nt][3]);
  }
}

// acc = X Y^T on this warp's tiles (rows 16 (w % 4), columns 32 (w / 4) .. + 31) of a 64 x 64
// product of two 64 x 128 smem tiles; tiles right of the diagonal block are left at zero (every
// caller masks them away).
template <typename T>
__device__ __forceinline__ void qk_tiles(float (&acc)[4][4], const T* x, const T* y, int lane, int warp) {
  const int row0 = 16 * (warp & 3), col0 = 32 * (warp >> 2);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
  if (col0 > row0 + 15) return;
#pragma unroll
  for (int ks = 0; ks < kHead / 16; ++ks) {
    uint32_t a[4];
    load_a_row_lm(a, x, kLdT, row0, ks * 16, lane);
#pragma unroll
    for (int nt = 0; nt < 4; nt += 2) {
      if (col0 + nt * 8 > row0 + 15) break;
      uint32_t b[4];
      load_b_nk_x2(b, y, kLdT, ks * 16, col0 + nt * 8, lane);
      mma16816<T>(acc[nt], a, b);
      mma16816<T>(acc[nt + 1], a, b + 2);
    }
  }
}

// Gate cumsum (warp 0, two tokens per lane; written to g_cum_out if defined) and beta (warps 1-2)
// of one (chunk, value head) into shared memory, in two halves so a kernel can issue the loads
// early and use them later (the sm90 kernel, gdn_intra_sm90.cuh, loads the next value head's while
// it works on the current one): intra_gates_load returns the thread's raw values, intra_gates_store
// scans and stores them; no barrier. Rows past len repeat the last cumsum so every exponent stays
// finite, and get beta 0. `tid` is the thread's index in the block; threads 0-95 take part.
struct GateRegs {
  float a = 0.f, b = 0.f;  // warp 0: raw g of tokens 2 lane, 2 lane + 1; warps 1-2: beta of token tid - 32
};
__device__ __forceinline__ GateRegs intra_gates_load(const IntraParams& p, const ChunkPos& c, int hv, int tid) {
  const int lane = tid & 31, warp = tid >> 5, len = c.len;
  GateRegs r;
  if (warp == 0) {
    const int64_t gb = c.batch * p.g.sb + c.row0 * p.g.st + hv * p.g.sh;
    const int i0 = 2 * lane, i1 = i0 + 1;
    r.a = i0 < len ? ld_any(p.g.p, 0, gb + i0 * p.g.st) : 0.f;
    r.b = i1 < len ? ld_any(p.g.p, 0, gb + i1 * p.g.st) : 0.f;
  } else if (warp == 1 || warp == 2) {
    const int i = tid - 32;
    r.a = i < len ? ld_any(p.beta.p, p.beta.dt, c.batch * p.beta.sb + (c.row0 + i) * p.beta.st + hv * p.beta.sh)
                  : 0.f;
  }
  return r;
}
__device__ __forceinline__ void intra_gates_store(const IntraParams& p, const ChunkPos& c, int hv, int tid,
                                                  const GateRegs& r, float* gc, float* bt) {
  const int lane = tid & 31, warp = tid >> 5, len = c.len;
  if (warp == 0) {
    const int i0 = 2 * lane, i1 = i0 + 1;
    float x0 = r.a, x1 = r.b;
    if (!p.g_is_cum) {
      float s = r.a + r.b;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += y;
      }
      x0 = s - r.b;
      x1 = s;
    }
    const int last = len - 1;
    const float lastv = __shfl_sync(0xffffffffu, (last & 1) ? x1 : x0, last >> 1);
    gc[i0] = i0 < len ? x0 : lastv;
    gc[i1] = i1 < len ? x1 : lastv;
    if (p.g_cum_out.defined()) {
      const Tok& o = p.g_cum_out;
      const int64_t ob = c.batch * o.sb + c.row0 * o.st + hv * o.sh;
      if (i0 < len) st_any(o.p, 0, ob + i0 * o.st, x0);
      if (i1 < len) st_any(o.p, 0, ob + i1 * o.st, x1);
    }
  } else if (warp == 1 || warp == 2) {
    bt[tid - 32] = r.a;
  }
}
__device__ __forceinline__ void intra_gates(const IntraParams& p, const ChunkPos& c, int hv, float* gc, float* bt) {
  const int tid = threadIdx.x;
  intra_gates_store(p, c, hv, tid, intra_gates_load(p, c, hv, tid), gc, bt);
}

template <typename T>
__global__ void __launch_bounds__(kIntraThreads, kIntraMinBlocks) intra_kernel(IntraParams p, SeqLayout L) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  IntraSmem<T>& sm = *reinterpret_cast<IntraSmem<T>*>(smem_raw);
  const int hv = blockIdx.y;
  ChunkPos c;
  if (!locate_chunk(L, blockIdx.x, &c)) return;
  const int hq = hv / (p.HV / p.H);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int len = c.len;

  intra_gates(p, c, hv, sm.gc, sm.bt);
  const bool need_wu = p.w.defined() || p.u.defined();
  const bool need_a = p.a_inv_out.defined() || p.t_out.defined() || need_wu;
  if (!need_a) return;  // cumsum only (whole block leaves together: no barrier follows)
  load_tile(sm.ks, kLdT, p.k.p, p.k.dt, c.batch * p.k.sb + c.row0 * p.k.st + hq * p.k.sh, p.k.st,
            len, kChunk, kHead);
  if (p.u.defined())
    load_tile(sm.vs, kLdT, p.v.p, p.v.dt, c.batch * p.v.sb + c.row0 * p.v.st + hv * p.v.sh, p.v.st,
              len, kChunk, kHead);
  cp_async_wait_all();
  __syncthreads();
  if (tid < kChunk) sm.cw[tid] = sm.bt[tid] * __expf(sm.gc[tid]);  // read after later barriers

  const int g = lane >> 2, t = lane & 3;
  const bool given = p.a_inv_in.defined();
  if (given) {
    const Tok& a = p.a_inv_in;
    const int64_t ab = c.batch * a.sb + c.row0 * a.st + hv * a.sh;
    for (int i = tid; i < kChunk * kChunk; i += kIntraThreads) {
      const int r = i / kChunk, j = i % kChunk;
      sm.tm[r * kLdI + j] = (r < len && j < len) ? ld_any(a.p, a.dt, ab + r * a.st + j) : (r == j ? 1.f : 0.f);
    }
    __syncthreads();
  } else {
    float acc[4][4];
    qk_tiles(acc, sm.ks, sm.ks, lane, warp);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * (warp & 3) + g + (e >= 2 ? 8 : 0), j = 32 * (warp >> 2) + nt * 8 + 2 * t + (e & 1);
        sm.u.am[i * kLdA + j] = i > j ? sm.bt[i] * acc[nt][e] * __expf(sm.gc[i] - sm.gc[j]) : 0.f;
      }
    }
    __syncthreads();
    invert_unit_lower(sm.u.am, sm.tm);
    if (p.a_inv_out.defined()) {
      const Tok& a = p.a_inv_out;
      const int64_t ab = c.batch * a.sb + c.row0 * a.st + hv * a.sh;
      for (int i = tid; i < len * kChunk; i += kIntraThreads) {
        const int r = i / kChunk, j = i % kChunk;
        st_any(a.p, a.dt, ab + r * a.st + j, j <= r ? sm.tm[r * kLdI + j] : 0.f);
      }
    }
    if (p.t_out.defined()) {  // T diag(beta)
      const Tok& a = p.t_out;
      const int64_t ab = c.batch * a.sb + c.row0 * a.st + hv * a.sh;
      for (int i = tid; i < len * kChunk; i += kIntraThreads) {
        const int r = i / kChunk, j = i % kChunk;
        const float t = j <= r ? sm.tm[r * kLdI + j] : 0.f;
        st_any(a.p, a.dt, ab + r * a.st + j, t * sm.bt[j]);
      }
    }
  }
  // A computed T is lower triangular: its upper blocks hold scratch, read as zeros. A given one is
  // used as it is. U goes first so that Q (for P) can load into V's tile while W is computed.
  const bool need_p = p.p_out.defined();
  if (p.u.defined()) {
    split_scaled(sm, sm.bt, given);
    __syncthreads();
    intra_product(sm, sm.vs, p.u, c.batch * p.u.sb + c.row0 * p.u.st + hv * p.u.sh, len, !given);
    __syncthreads();
  }
  if (need_p) {
    load_tile(sm.vs, kLdT, p.q.p, p.q.dt, c.batch * p.q.sb + c.row0 * p.q.st + hq * p.q.sh, p.q.st, len,
              kChunk, kHead);
    cp_async_commit();
  }
  if (p.w.defined()) {
    split_scaled(sm, sm.cw, given);
    __syncthreads();
    intra_product(sm, sm.ks, p.w, c.batch * p.w.sb + c.row0 * p.w.st + hv * p.w.sh, len, !given);
  }
  if (need_p) {
    cp_async_wait_all();
    __syncthreads();
    // P: (Q K^T)[i][j] exp(g_i - g_j) on and below the diagonal, rows < len.
    float acc[4][4];
    qk_tiles(acc, sm.vs, sm.ks, lane, warp);
    const Tok& o = p.p_out;
    const int64_t ob = c.batch * o.sb + c.row0 * o.st + hv * o.sh;
    const int i0 = 16 * (warp & 3) + g, j0 = 32 * (warp >> 2);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int i = i0 + h2 * 8, j = j0 + nt * 8 + 2 * t;
        const float gi = sm.gc[i];
        acc[nt][2 * h2] = j <= i ? acc[nt][2 * h2] * __expf(gi - sm.gc[j]) : 0.f;
        acc[nt][2 * h2 + 1] = j + 1 <= i ? acc[nt][2 * h2 + 1] * __expf(gi - sm.gc[j + 1]) : 0.f;
      }
    if (tok_vec16<T>(o)) {
      T* const pb = static_cast<T*>(o.p) + ob + j0;
      store_acc_rows16<T>(pb + i0 * o.st, pb + (i0 + 8) * o.st, acc, i0 < len, i0 + 8 < len, t);
    } else {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
          const int i = i0 + h2 * 8, j = j0 + nt * 8 + 2 * t;
          if (i < len) st_pair(o.p, o.dt, ob + i * o.st + j, acc[nt][2 * h2], acc[nt][2 * h2 + 1]);
        }
    }
  }
}

template <typename T>
Status launch_intra_t(const IntraParams& p, const SeqLayout& L, int64_t max_chunks, cudaStream_t s) {
  const size_t smem = sizeof(IntraSmem<T>);
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(intra_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  dim3 grid(static_cast<unsigned>(max_chunks), p.HV);
  intra_kernel<T><<<grid, kIntraThreads, smem, s>>>(p, L);
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn intra");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda
