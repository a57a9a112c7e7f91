#include "cuda/attention/portable/planner.h"

#include <algorithm>
#include <cstdint>

namespace attnkit::detail {

namespace {
constexpr int kMaxSplits = 128;
// Each split should stream at least this many key blocks, or the pipeline never fills and the
// combine's traffic outweighs the gain.
constexpr int kMinBlocksPerSplit = 4;
// Two CTAs of the portable kernel fit on an SM (shared memory / registers).
constexpr int kCtasPerSm = 2;
}  // namespace

int plan_num_splits(const PlanInput& in) {
  const int64_t n_blocks = (int64_t{in.max_seqlen_k} + in.block_n - 1) / in.block_n;
  const int grid_cap = std::max(1, 65535 / std::max(in.hkv, 1));
  if (in.requested_splits > 0)
    return static_cast<int>(std::min<int64_t>({in.requested_splits, kMaxSplits, grid_cap}));
  const int64_t m_blocks =
      (int64_t{in.max_seqlen_q} * in.group + in.block_m - 1) / in.block_m;
  const int64_t ctas = m_blocks * in.batch * in.hkv;
  const int64_t slots = int64_t{in.sm_count} * kCtasPerSm;
  if (ctas <= 0 || ctas >= slots) return 1;
  // Whole waves only: a partial second wave would leave most SMs idle for its duration.
  int64_t splits = slots / ctas;
  splits = std::min<int64_t>(splits, n_blocks / kMinBlocksPerSplit);
  splits = std::min<int64_t>({splits, kMaxSplits, grid_cap});
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

namespace {
// A decode split should stream at least this many 32-key blocks: fewer, and its fixed costs (Q
// load, pipeline fill, its share of the merge) outweigh the bandwidth it adds. Two since the
// kernel fills every stage before its first compute (a two-block split is one DRAM round trip):
// b1 x 1k measured faster with 16 splits than with 8, contiguous and paged.
constexpr int kMinDecodeBlocksPerSplit = 2;
}  // namespace

int plan_decode_splits(const DecodePlanInput& in) {
  const int cap = std::max(1, in.max_splits);
  if (in.requested_splits > 0) return std::min(in.requested_splits, cap);
  const int64_t ctas = int64_t{in.batch} * in.hkv;
  // Every SM already has a CTA streaming K/V: splitting only adds the merge's traffic.
  if (ctas <= 0 || ctas >= in.sm_count) return 1;
  const int64_t n_blocks = (int64_t{in.max_seqlen_k} + in.block_n - 1) / in.block_n;
  // One wave with every CTA slot busy; a second, partial wave would leave most SMs idle. (One CTA
  // per SM instead measured slower: with one warp per scheduler the kernel's instruction stream
  // sets the time, not DRAM.)
  int64_t splits = int64_t{in.sm_count} * std::max(in.ctas_per_sm, 1) / ctas;
  splits = std::min<int64_t>({splits, n_blocks / kMinDecodeBlocksPerSplit, cap});
  if (splits <= 1) return 1;
  // Fewest splits with the same longest split: the call lasts as long as its longest split, and
  // each extra split only adds merge traffic (8k keys: 32 splits of 4 64-key stages, not 33 of
  // 3-4).
  const int64_t per = (n_blocks + splits - 1) / splits;
  return static_cast<int>((n_blocks + per - 1) / per);
}

}  // namespace attnkit::detail
