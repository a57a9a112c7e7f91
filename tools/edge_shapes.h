// The edge-shape list of docs/design.md ("Correctness"), as run by `attnkit check --edge-shapes`:
// zero-length sequences, Sq > Sk causal, one token, prime lengths, page sizes 1/16/48/256,
// Hq/Hkv of 1/4/7/8, head dims 64..256 (and 192/128), rows fully masked by a window, large
// logits, very uneven varlen batches; plus merge_states and Gated DeltaNet corner cases.
// Sizes are kept small enough for the CPU-vs-naive comparison to finish in about a minute on
// two cores.
#pragma once

#include <string>
#include <vector>

#include "cases.h"

namespace attnkit::cli {

enum class OpKind { kAttention, kMerge, kGdn, kGdnDecode, kAppendKv };

struct EdgeCase {
  OpKind op = OpKind::kAttention;
  std::string why;  // which edge it covers
  AttnCase attn;
  MergeCase merge;
  GdnCase gdn;
  AppendCase append;
};

std::vector<EdgeCase> edge_cases();

}  // namespace attnkit::cli
