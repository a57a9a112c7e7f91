// Launch template for one portable prefill variant (prefill_kernel.cuh; decode has its own kernel,
// decode_launch.cuh), and the split-KV combine launch. The instantiation TUs
// (src/cuda/instantiations/) each expand ATTNKIT_DEFINE_PORTABLE_FWD once.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "attnkit/status.h"
#include "cuda/attention/common/combine_kernel.cuh"
#include "cuda/attention/portable/prefill_kernel.cuh"
#include "cuda/common/cuda_check.h"

namespace attnkit::gpu {

// Prefill tile per head dims, mask and score mod, each the fastest measured against PyTorch's
// FlashAttention-2 on the FA3-paper shapes (two CTAs of 4 warps per SM everywhere but d256
// without a mask):
//   d64 no mask: 128 x 128, 2 stages, Q re-read from shared memory (faster than 128 x 64,
//     3 stages, Q in registers);
//   d64 masked: 128 x 64, 3 stages, Q in registers (two 16-row MMA tiles per warp);
//   d128 plain mod: 128 x 64, 2 stages (faster than single K and V buffers), Q re-read from
//     shared memory (in registers, S + O + Q pass 255 registers);
//   d256 masked: 64 x 64 in warp pairs, single K and V buffers (faster than without pairs, and
//     than 8 warps of 16 rows with 2 stages, paired or not), except calls with at most 512 query
//     rows per head (ShortMaskedTile);
//   d256 no mask: 128 x 64, 8 warps in pairs, single K and V buffers, one CTA per SM: each K / V
//     tile feeds twice the rows, which halves the L2 traffic that bounds the 64-row tile (faster
//     from 4k tokens up, as fast below). Causal, its 128-row diagonal tiles made it slower, so
//     masked calls keep 64 rows;
//   softcap / ALiBi (more per-row state), d96, 192/128: 64 query rows, 2 stages;
//   192/192: 64 x 32, 2 stages.
// Every tile skips O's rescale while no row's max grew by more than 2^8 (lazy_rescale: faster at
// d64 and d128, about as fast at d256).
//
// compact: the tiles for devices that grant a block at most kCompactSmemBytes of shared memory
// (sm_86, sm_89, sm_120: 99 KB). Where the tile above needs more (d128 without softcap / ALiBi:
// 103 KB; 192/128: 109 KB; d256: 109 or 152 KB), it keeps its block sizes with single K and V
// buffers, or at d256 takes 64 x 32 without pairs; the others fit already. Not timed (no such
// GPU on the benchmark machine); tested for correctness on Hopper by planning for a 99 KB device.
struct PrefillShape {
  int block_m, block_n, stages;  // stages == 1: one K and one V buffer, refilled in turn
  bool q_in_regs;
  int warps = 4;
  bool pairs = false;  // warp pairs split the keys of S and the columns of O (prefill_kernel.cuh)
  bool lazy_rescale = true;
};
inline constexpr int kCompactSmemBytes = 99 * 1024;
constexpr PrefillShape prefill_shape(int dqk, int dv, bool trivial_mod, bool masked,
                                     bool compact = false) {
  if (compact) {
    if (dqk == 128 && trivial_mod) return {128, 64, 1, false};
    if (dqk == 192 && dv == 128) return {64, 64, 1, false};
    if (dqk == 256) return {64, 32, 1, false};
  }
  if (dqk == 64 && trivial_mod && !masked) return {128, 128, 2, false};
  if (dqk == 64) return {trivial_mod ? 128 : 64, 64, 3, true};
  if (dqk == 128 && trivial_mod) return {128, 64, 2, false};
  if (dqk <= 128) return {64, 64, 2, true};  // 96, and 128 with softcap / ALiBi
  if (dv <= 128) return {64, 64, 2, false};  // 192/128
  if (dqk == 256 && !masked) return {128, 64, 1, false, 8, true};
  if (dqk == 256) return {64, 64, 1, false, 4, true};
  return {64, 32, 2, false};  // 192/192
}
template <int kDqk, int kDv, class S>
using TileOf = PrefillTile<kDqk, kDv, S::kS.block_m, S::kS.block_n, S::kS.stages,
                           S::kS.q_in_regs, S::kS.warps, S::kS.pairs, S::kS.lazy_rescale>;
template <int kDqk, int kDv, bool kTrivialMod, bool kMasked, bool kCompact>
struct PrefillTileSel {
  static constexpr PrefillShape kS = prefill_shape(kDqk, kDv, kTrivialMod, kMasked, kCompact);
  using type = TileOf<kDqk, kDv, PrefillTileSel>;
};

template <int kDqk, int kDv, class Mask, class Mod, bool kCompact = false>
using TileFor = typename PrefillTileSel<kDqk, kDv, std::is_same_v<Mod, NoScoreMod>,
                                        !std::is_same_v<Mask, NoMask>, kCompact>::type;

// Masked d256 calls with at most kShortMaskedRows query rows (tokens x group) per head run the
// tile without warp pairs: 4 warps of 16 rows, 64 x 64, single K and V buffers, measured faster
// than the pairs at 512 causal rows (at 1k causal and at 512 without a mask the pairs were as
// fast or faster). Both tiles have the same block sizes, so the planner's view holds. (fp16
// takes the same tiles; only bf16 was timed.)
inline constexpr int64_t kShortMaskedRows = 512;
template <int kDqk, int kDv, class Mask, class Mod>
struct ShortMaskedTile {
  using type = void;  // none: TileFor serves every length
};
template <>
struct ShortMaskedTile<256, 256, WindowChunkMask, NoScoreMod> {
  using type = PrefillTile<256, 256, 64, 64, 1, false, 4, false, true>;
};

// The shared memory a variant's regular tiles need (TileFor's and ShortMaskedTile's): the
// dispatcher plans the compact tile where the device grants a block less.
template <int kDqk, int kDv, class Mask, class Mod>
constexpr int prefill_smem_bytes() {
  using Short = typename ShortMaskedTile<kDqk, kDv, Mask, Mod>::type;
  int bytes = TileFor<kDqk, kDv, Mask, Mod>::kSmemBytes;
  if constexpr (!std::is_void_v<Short>)
    bytes = bytes > Short::kSmemBytes ? bytes : Short::kSmemBytes;
  return bytes;
}

// The planner's view of the tiles (host code cannot name them); each instantiation checks that
// they agree.
constexpr int block_m_for(int dqk, int dv, bool trivial_mod, bool masked, bool compact) {
  return prefill_shape(dqk, dv, trivial_mod, masked, compact).block_m;
}
constexpr int block_n_for(int dqk, int dv, bool trivial_mod, bool masked, bool compact) {
  return prefill_shape(dqk, dv, trivial_mod, masked, compact).block_n;
}

// Grid limits of y/z (65535) bound batch and kv_heads * num_splits; the planner keeps within them.
inline constexpr int kMaxGridYZ = 65535;

template <class Tile, typename T, class Mask, class Mod>
Status launch_portable_fwd(const FwdParams& p, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const int64_t rows = int64_t{p.max_seqlen_q} * p.group.d;
  const int64_t m_blocks = (rows + Tile::kBlockM - 1) / Tile::kBlockM;
  if (m_blocks == 0 || p.batch == 0) return Status::Ok();
  if (p.batch > kMaxGridYZ || int64_t{p.hkv} * p.num_splits > kMaxGridYZ || m_blocks > INT32_MAX)
    return Status::Unsupported("portable attention: batch (" + std::to_string(p.batch) +
                               ") or kv_heads * num_splits exceeds the grid limit 65535");
  const auto kernel = portable_prefill_kernel<Tile, T, Mask, Mod>;
  // Not a stream operation, so it is legal while the stream is being captured.
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Tile::kSmemBytes));
  const dim3 grid(static_cast<unsigned>(m_blocks), static_cast<unsigned>(p.hkv * p.num_splits),
                  static_cast<unsigned>(p.batch));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, s>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("portable attention kernel");
  return Status::Ok();
}

// One variant's launch: its tile, or ShortMaskedTile's for short calls where there is one; the
// compact tile alone where shared memory is short.
template <int kDqk, int kDv, typename T, class Mask, class Mod, bool kCompact>
Status launch_portable_fwd_variant(const FwdParams& p, void* stream) {
  using Tile = TileFor<kDqk, kDv, Mask, Mod, kCompact>;
  using Short = typename ShortMaskedTile<kDqk, kDv, Mask, Mod>::type;
  if constexpr (kCompact) {
    static_assert(Tile::kSmemBytes <= kCompactSmemBytes, "the compact tile fits 99 KB");
  } else if constexpr (!std::is_void_v<Short>) {
    static_assert(Short::kBlockM == Tile::kBlockM && Short::kBlockN == Tile::kBlockN,
                  "the planner's block sizes hold for both tiles");
    if (int64_t{p.max_seqlen_q} * p.group.d <= kShortMaskedRows)
      return launch_portable_fwd<Short, T, Mask, Mod>(p, stream);
  }
  return launch_portable_fwd<Tile, T, Mask, Mod>(p, stream);
}

}  // namespace attnkit::gpu

// Defines the launchers of one variant: portable_fwd_<dqk>_<dv>_<dtype>_<mask>_<mod>_<tile>, and
// the same with the suffix _compact (the same kernel where the regular tile fits 99 KB).
#define ATTNKIT_PORTABLE_FWD_FN(DQK, DV, DT, MASK, MOD, TILE) \
  portable_fwd_##DQK##_##DV##_##DT##_##MASK##_##MOD##_##TILE
#define ATTNKIT_PORTABLE_FWD_FN_COMPACT(DQK, DV, DT, MASK, MOD, TILE) \
  portable_fwd_##DQK##_##DV##_##DT##_##MASK##_##MOD##_##TILE##_compact
#define ATTNKIT_PORTABLE_CTYPE_bf16 __nv_bfloat16
#define ATTNKIT_PORTABLE_CTYPE_fp16 __half
#define ATTNKIT_PORTABLE_FWD_CHECK_BLOCKS(DQK, DV, MASK, MOD, COMPACT)                      \
  static_assert(TileFor<DQK, DV, MASK, MOD, COMPACT>::kBlockM ==                            \
                        block_m_for(DQK, DV, std::is_same_v<MOD, NoScoreMod>,               \
                                    !std::is_same_v<MASK, NoMask>, COMPACT) &&              \
                    TileFor<DQK, DV, MASK, MOD, COMPACT>::kBlockN ==                        \
                        block_n_for(DQK, DV, std::is_same_v<MOD, NoScoreMod>,               \
                                    !std::is_same_v<MASK, NoMask>, COMPACT),                \
                "block_m_for / block_n_for disagree with the tile");
#define ATTNKIT_DEFINE_PORTABLE_FWD(DQK, DV, DT, MASK, MOD, TILE)                                 \
  namespace attnkit::gpu {                                                                         \
  ATTNKIT_PORTABLE_FWD_CHECK_BLOCKS(DQK, DV, MASK, MOD, false)                                     \
  ATTNKIT_PORTABLE_FWD_CHECK_BLOCKS(DQK, DV, MASK, MOD, true)                                      \
  Status ATTNKIT_PORTABLE_FWD_FN(DQK, DV, DT, MASK, MOD, TILE)(const FwdParams& p, void* stream) { \
    return launch_portable_fwd_variant<DQK, DV, ATTNKIT_PORTABLE_CTYPE_##DT, MASK, MOD, false>(   \
        p, stream);                                                                                \
  }                                                                                                \
  Status ATTNKIT_PORTABLE_FWD_FN_COMPACT(DQK, DV, DT, MASK, MOD, TILE)(const FwdParams& p,         \
                                                                       void* stream) {             \
    return launch_portable_fwd_variant<DQK, DV, ATTNKIT_PORTABLE_CTYPE_##DT, MASK, MOD, true>(    \
        p, stream);                                                                                \
  }                                                                                                \
  }
