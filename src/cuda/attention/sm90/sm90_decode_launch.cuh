// Host side of the Hopper decode kernel: K's and V's tensor maps, the launch with its split-KV
// counters. Included only by the instantiation TUs (src/cuda/instantiations/sm90_decode_d*.cu).
//
// The tensor maps are encoded with cuTensorMapEncodeTiled, reached through the runtime's
// cudaGetDriverEntryPointByVersion, so the library never links libcuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "attnkit/status.h"
#include "cuda/attention/portable/decode_launch.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/instantiations/sm90_decode_list.h"

#if defined(ATTNKIT_HAS_SM90A)
#include <cute/arch/copy_sm90_desc.hpp>

#include "cuda/attention/sm90/sm90_decode_kernel.cuh"

namespace attnkit::gpu::sm90 {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The tensor map of K or V as TMA sees it: (D, rows, KV heads, outer) with 128-byte swizzled
// boxes of (64, box_rows, 1, 1); strides in elements. An extent of 1 takes the row stride (TMA
// checks every stride, used or not).
inline Status encode_kv_map(CUtensorMap* map, const void* base, bool bf16, int d, int64_t rows,
                            int heads, int64_t outers, int64_t row_stride, int64_t head_stride,
                            int64_t outer_stride, int box_rows) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr)
    return Status::Cuda("sm90 decode: the driver has no cuTensorMapEncodeTiled");
  if (heads == 1) head_stride = row_stride;
  if (outers == 1) outer_stride = row_stride;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(outers)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(row_stride) * 2,
                                 static_cast<cuuint64_t>(head_stride) * 2,
                                 static_cast<cuuint64_t>(outer_stride) * 2};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kSwizzleCols),
                             static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const auto dtype = bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = encode(map, dtype, 4, const_cast<void*>(base), dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::Invalid("sm90 decode: cuTensorMapEncodeTiled refused the K / V layout (error " +
                           std::to_string(static_cast<int>(r)) + ")");
  return Status::Ok();
}

template <class Tile, typename T, class Mask, class Mod>
Status launch_sm90_decode(const FwdParams& p, bool l2_evict_first, void* stream) {
  if (p.batch == 0 || p.max_seqlen_q == 0) return Status::Ok();
  ATTNKIT_RETURN_IF_ERROR(check_decode_launch(p, Tile::kRows, "sm90 decode kernel"));
  const KvOperand& kv = p.kv;
  const bool paged = kv.kind == KvKind::kPaged;
  DecodeTmaParams P;
  P.p = p;
  P.box_rows = decode_box_rows(Tile::kBlockN, paged ? kv.page_size.d : 0);
  if (P.box_rows == 0)
    return Status::Invalid("sm90 decode kernel: page size " + std::to_string(kv.page_size.d) +
                           " is not a multiple of 8");
  while ((1 << P.box_shift) < P.box_rows) ++P.box_shift;
  P.l2_hint = static_cast<uint64_t>(l2_evict_first ? cute::TMA::CacheHintSm90::EVICT_FIRST
                                                   : cute::TMA::CacheHintSm90::EVICT_NORMAL);
  const int64_t rows = paged ? kv.page_size.d : kv.k_rows;
  const int64_t outers = paged ? kv.num_pages : kv.kind == KvKind::kContiguous ? p.batch : 1;
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  ATTNKIT_RETURN_IF_ERROR(encode_kv_map(&P.tma_k, kv.k, kBf16, Tile::kDqk, rows, p.hkv, outers,
                                        kv.k_row_stride, kv.k_head_stride, kv.k_outer_stride,
                                        P.box_rows));
  ATTNKIT_RETURN_IF_ERROR(encode_kv_map(&P.tma_v, kv.v, kBf16, Tile::kDv, rows, p.hkv, outers,
                                        kv.v_row_stride, kv.v_head_stride, kv.v_outer_stride,
                                        P.box_rows));

  return launch_decode_grid<sm90_decode_kernel<Tile, T, Mask, Mod>>(
      P, p, Tile::kThreads, Tile::kSmemBytes, static_cast<cudaStream_t>(stream),
      "sm90_decode_kernel");
}

}  // namespace attnkit::gpu::sm90

// Defines sm90_decode_<d>_<dtype>_<mask>_<mod>_r<rows> (see sm90_decode_list.h).
#define ATTNKIT_DEFINE_SM90_DECODE(D, DT, MASK, MOD, ROWS)                                       \
  namespace attnkit::gpu::sm90 {                                                                 \
  Status ATTNKIT_SM90_DECODE_FN(D, DT, MASK, MOD, ROWS)(const FwdParams& p, bool l2_evict_first, \
                                                        void* stream) {                          \
    return launch_sm90_decode<DecodeTmaTile<D, (ROWS) / 16>, ATTNKIT_PORTABLE_DECODE_CTYPE_##DT, \
                              MASK, MOD>(p, l2_evict_first, stream);                             \
  }                                                                                              \
  }
#else
#define ATTNKIT_DEFINE_SM90_DECODE(D, DT, MASK, MOD, ROWS)
#endif
