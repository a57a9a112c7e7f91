// Launch template for one portable kernel variant, and the split-KV combine launch. The
// instantiation TUs (src/cuda/instantiations/) each expand ATTNKIT_DEFINE_PORTABLE_FWD once.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "attnkit/status.h"
#include "cuda/attention/portable/combine_kernel.cuh"
#include "cuda/attention/portable/fwd_kernel.cuh"
#include "cuda/common/cuda_check.h"

namespace attnkit::gpu {

// Tile shape per variant. Prefill: two 16-row MMA tiles per warp where the registers allow and
// the score mod is trivial, else one. Decode: one 16-row tile, the warps splitting the keys.
template <int kDqk, int kDv, class Mod, bool kDecode>
using TileFor = std::conditional_t<
    kDecode, FwdTile<kDqk, kDv, 1, true>,
    FwdTile<kDqk, kDv, (std::is_same_v<Mod, NoScoreMod> && kDqk <= 128 && kDv <= 128) ? 2 : 1>>;

// The planner's view of the tiles (host code cannot name them); each instantiation checks that
// they agree.
constexpr int block_m_for(int dqk, int dv, bool trivial_mod, bool decode) {
  return decode ? 16 : (trivial_mod && dqk <= 128 && dv <= 128) ? 128 : 64;
}
constexpr int block_n_for(int dqk, int dv, bool decode) {
  return (decode || (dqk <= 128 && dv <= 128)) ? 64 : 32;
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
  auto kernel = portable_fwd_kernel<Tile, T, Mask, Mod>;
  // Not a stream operation, so it is legal while the stream is being captured.
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Tile::kSmemBytes));
  const dim3 grid(static_cast<unsigned>(m_blocks), static_cast<unsigned>(p.hkv * p.num_splits),
                  static_cast<unsigned>(p.batch));
  kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, s>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("portable_fwd_kernel");
  return Status::Ok();
}

}  // namespace attnkit::gpu

// Defines the launcher of one variant: portable_fwd_<dqk>_<dv>_<dtype>_<mask>_<mod>_<tile>.
#define ATTNKIT_PORTABLE_FWD_FN(DQK, DV, DT, MASK, MOD, TILE) \
  portable_fwd_##DQK##_##DV##_##DT##_##MASK##_##MOD##_##TILE
#define ATTNKIT_PORTABLE_CTYPE_bf16 __nv_bfloat16
#define ATTNKIT_PORTABLE_CTYPE_fp16 __half
#define ATTNKIT_PORTABLE_IS_DECODE_prefill false
#define ATTNKIT_PORTABLE_IS_DECODE_decode true
#define ATTNKIT_DEFINE_PORTABLE_FWD(DQK, DV, DT, MASK, MOD, TILE)                                \
  namespace attnkit::gpu {                                                                        \
  using Tile_##DQK##_##DV##_##MOD##_##TILE = TileFor<DQK, DV, MOD, ATTNKIT_PORTABLE_IS_DECODE_##TILE>; \
  static_assert(Tile_##DQK##_##DV##_##MOD##_##TILE::kBlockM ==                                    \
                    block_m_for(DQK, DV, std::is_same_v<MOD, NoScoreMod>,                         \
                                ATTNKIT_PORTABLE_IS_DECODE_##TILE),                               \
                "block_m_for disagrees with the tile");                                           \
  static_assert(Tile_##DQK##_##DV##_##MOD##_##TILE::kBlockN ==                                    \
                    block_n_for(DQK, DV, ATTNKIT_PORTABLE_IS_DECODE_##TILE),                      \
                "block_n_for disagrees with the tile");                                           \
  Status ATTNKIT_PORTABLE_FWD_FN(DQK, DV, DT, MASK, MOD, TILE)(const FwdParams& p, void* stream) { \
    return launch_portable_fwd<Tile_##DQK##_##DV##_##MOD##_##TILE, ATTNKIT_PORTABLE_CTYPE_##DT,   \
                               MASK, MOD>(p, stream);                                             \
  }                                                                                               \
  }
