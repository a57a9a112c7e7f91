// Naive fp64 references written straight from the definitions in docs/design.md, independent of the
// library's CPU backend: what the CPU backend is tested against (and `attnkit check --naive`).
// Inputs are host views of any float dtype; results are fp64, in the row-major order of O's
// (and LSE's) logical shape.
#pragma once

#include <vector>

#include "attnkit/attention.h"
#include "attnkit/gdn.h"
#include "attnkit/kv_cache.h"

namespace attnkit::testkit {

// Every option of AttentionArgs (layouts, GQA, masks, softcap, ALiBi, sinks, scale); lse gets
// -inf for rows with no visible key. num_splits is ignored.
Status naive_attention(const AttentionArgs& args, std::vector<double>* o, std::vector<double>* lse);

// merge_states from its definition.
Status naive_merge_states(const MergeStatesArgs& args, std::vector<double>* o,
                          std::vector<double>* lse);

// append_kv_cache from its definition (kv_cache.h), in place on host tensors: token t with slot
// s >= 0 goes to page s / page_size, row s % page_size; e4m3 caches store x / scale rounded to
// nearest even and saturated, with a per-token scale written first as max|x| / 448 (1 if 0).
Status naive_append_kv(const AppendKvArgs& args);

// Gated DeltaNet token by token in fp64 (the recurrence in gdn.h). final_state: [N, HV, K, V].
Status naive_gdn(const GdnChunkArgs& args, std::vector<double>* o, std::vector<double>* final_state);

}  // namespace attnkit::testkit
