// Launch templates for the portable decode kernel, with its in-kernel split-KV merge. The
// instantiation TUs (src/cuda/instantiations/portable_decode_*.cu) each expand
// ATTNKIT_DEFINE_PORTABLE_DECODE for their variants; portable_decode_list.h lists them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attnkit/status.h"
#include "cuda/attention/portable/decode_kernel.cuh"
#include "cuda/common/cuda_check.h"

namespace attnkit::gpu {

// Grid limits: x = kv_heads * num_splits (2^31 - 1), y = batch (65535).
inline constexpr int kMaxDecodeBatch = 65535;

// The checks every decode launcher makes of its parameters; `what` names the kernel in errors.
inline Status check_decode_launch(const FwdParams& p, int rows, const char* what) {
  if (int64_t{p.max_seqlen_q} * p.group.d > rows)
    return Status::Invalid(std::string(what) + ": max_seqlen_q * group (" +
                           std::to_string(int64_t{p.max_seqlen_q} * p.group.d) +
                           ") exceeds its " + std::to_string(rows) + " rows");
  if (p.batch > kMaxDecodeBatch || p.num_splits < 1 || p.num_splits > kMaxDecodeSplits)
    return Status::Invalid(std::string(what) + ": batch must be <= 65535 and num_splits in [1, " +
                           std::to_string(kMaxDecodeSplits) + "]");
  if (p.num_splits > 1 &&
      (p.part_o == nullptr || p.part_lse == nullptr || p.split_counters == nullptr))
    return Status::Invalid(std::string(what) + ": num_splits > 1 needs the partial buffers and "
                           "the split counters");
  return Status::Ok();
}

// Launches decode kernel kKernel on its grid, x = kv_heads * num_splits, y = batch. Its shared-
// memory limit is a per-device function attribute, set once per device (decode calls are short,
// so host time per call matters; not a stream operation, so legal while the stream is captured).
// Split-KV (num_splits > 1): the arrival counters are zeroed first (decode_merge.cuh), and on
// sm_90+ the kernel is launched as that kernel's programmatic dependent, so it starts without
// waiting for it; its last split per KV head merges the partials.
template <auto kKernel, class Params>
Status launch_decode_grid(const Params& params, const FwdParams& p, int threads, int smem_bytes,
                          cudaStream_t s, const char* name) {
  int device = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&device));
  static std::atomic<uint64_t> configured{0};
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (configured.load(std::memory_order_acquire) & bit) == 0) {
    ATTNKIT_CUDA_TRY(
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }
  const dim3 grid(static_cast<unsigned>(p.hkv * p.num_splits), static_cast<unsigned>(p.batch));
  if (p.num_splits == 1) {
    kKernel<<<grid, threads, smem_bytes, s>>>(params);
    ATTNKIT_CUDA_CHECK_LAUNCH(name);
    return Status::Ok();
  }

  const int n_counters = p.batch * p.hkv;
  constexpr int kZeroBlock = 256;
  const int zero_blocks = std::min((n_counters + kZeroBlock - 1) / kZeroBlock, 1024);
  decode_zero_counters<kZeroBlock><<<zero_blocks, kZeroBlock, 0, s>>>(p.split_counters, n_counters);
  ATTNKIT_CUDA_CHECK_LAUNCH("decode_zero_counters");
  int cc_major = 0;
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cc_major >= 9 ? 1 : 0;
  ATTNKIT_CUDA_TRY(cudaLaunchKernelEx(&cfg, kKernel, params));
  return Status::Ok();
}

template <class Tile, typename T, class Mask, class Mod>
Status launch_portable_decode(const FwdParams& p, void* stream) {
  if (p.batch == 0 || p.max_seqlen_q == 0) return Status::Ok();
  ATTNKIT_RETURN_IF_ERROR(check_decode_launch(p, Tile::kRows, "portable decode kernel"));
  return launch_decode_grid<portable_decode_kernel<Tile, T, Mask, Mod>>(
      p, p, Tile::kThreads, Tile::kSmemBytes, static_cast<cudaStream_t>(stream),
      "portable_decode_kernel");
}

// Launches Tile, or TileSplitContiguous for a split call over contiguous or ragged KV where the
// two differ (decode_key_groups).
template <class Tile, class TileSplitContiguous, typename T, class Mask, class Mod>
Status launch_portable_decode_for(const FwdParams& p, void* stream) {
  if constexpr (!std::is_same_v<Tile, TileSplitContiguous>)
    if (p.num_splits > 1 && p.kv.kind != KvKind::kPaged)
      return launch_portable_decode<TileSplitContiguous, T, Mask, Mod>(p, stream);
  return launch_portable_decode<Tile, T, Mask, Mod>(p, stream);
}

}  // namespace attnkit::gpu

// Defines portable_decode_<dqk>_<dv>_<dtype>_<mask>_<mod>_r<rows>: the decode kernel for up to
// `rows` (16 or 32) query rows (tokens x GQA group) per KV head, and the same with its K/V read
// evict-first in L2 (suffix _l2stream; decode_l2_stream in planner.h picks). The _FP8 form
// defines the first over an e4m3 KV cache (suffix _e4m3kv); it has no _l2stream twin because
// ptxas 13.0 compiles its cache-hinted copies into an LDGSTS that traps as an illegal
// instruction on sm_90a.
#define ATTNKIT_PORTABLE_DECODE_FN(DQK, DV, DT, MASK, MOD, ROWS) \
  portable_decode_##DQK##_##DV##_##DT##_##MASK##_##MOD##_r##ROWS
#define ATTNKIT_PORTABLE_DECODE_FN_L2STREAM(DQK, DV, DT, MASK, MOD, ROWS) \
  portable_decode_##DQK##_##DV##_##DT##_##MASK##_##MOD##_r##ROWS##_l2stream
#define ATTNKIT_PORTABLE_DECODE_CTYPE_bf16 __nv_bfloat16
#define ATTNKIT_PORTABLE_DECODE_CTYPE_fp16 __half
#define ATTNKIT_PORTABLE_DECODE_FN_FP8(DQK, DV, DT, MASK, MOD, ROWS) \
  portable_decode_##DQK##_##DV##_##DT##_##MASK##_##MOD##_r##ROWS##_e4m3kv
#define ATTNKIT_PORTABLE_DECODE_TILE(DQK, DV, MASK, MOD, ROWS, L2, SPLIT_CONTIGUOUS, FP8)         \
  DecodeTile<DQK, DV, (ROWS) / 16,                                                                \
             decode_key_groups<DQK, DV, (ROWS) / 16,                                              \
                               std::is_same_v<MASK, NoMask> && std::is_same_v<MOD, NoScoreMod>,   \
                               SPLIT_CONTIGUOUS>(),                                               \
             L2, FP8>
#define ATTNKIT_PORTABLE_DECODE_LAUNCH(DQK, DV, DT, MASK, MOD, ROWS, L2, FP8)                         \
  launch_portable_decode_for<ATTNKIT_PORTABLE_DECODE_TILE(DQK, DV, MASK, MOD, ROWS, L2, false, FP8), \
                             ATTNKIT_PORTABLE_DECODE_TILE(DQK, DV, MASK, MOD, ROWS, L2, true, FP8),  \
                             ATTNKIT_PORTABLE_DECODE_CTYPE_##DT, MASK, MOD>
#define ATTNKIT_DEFINE_PORTABLE_DECODE(DQK, DV, DT, MASK, MOD, ROWS)                              \
  namespace attnkit::gpu {                                                                        \
  Status ATTNKIT_PORTABLE_DECODE_FN(DQK, DV, DT, MASK, MOD, ROWS)(const FwdParams& p,            \
                                                                   void* stream) {               \
    return ATTNKIT_PORTABLE_DECODE_LAUNCH(DQK, DV, DT, MASK, MOD, ROWS, KvL2Normal, false)(p,     \
                                                                                        stream); \
  }                                                                                               \
  Status ATTNKIT_PORTABLE_DECODE_FN_L2STREAM(DQK, DV, DT, MASK, MOD, ROWS)(const FwdParams& p,   \
                                                                            void* stream) {      \
    return ATTNKIT_PORTABLE_DECODE_LAUNCH(DQK, DV, DT, MASK, MOD, ROWS, KvL2Stream, false)(p,     \
                                                                                        stream); \
  }                                                                                               \
  }
#define ATTNKIT_DEFINE_PORTABLE_DECODE_FP8(DQK, DV, DT, MASK, MOD, ROWS)                          \
  namespace attnkit::gpu {                                                                        \
  Status ATTNKIT_PORTABLE_DECODE_FN_FP8(DQK, DV, DT, MASK, MOD, ROWS)(const FwdParams& p,        \
                                                                       void* stream) {           \
    return ATTNKIT_PORTABLE_DECODE_LAUNCH(DQK, DV, DT, MASK, MOD, ROWS, KvL2Normal, true)(p,      \
                                                                                       stream);  \
  }                                                                                               \
  }
