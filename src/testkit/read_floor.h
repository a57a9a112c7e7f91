// The read floor of a memory-bound op: one kernel that reads a set of device buffers once, with
// 16-byte loads over the whole GPU, and writes nothing that matters. Timed by time_calls like the
// op, under the same method (the same L2 flush, the same launch and event overheads), it shows
// what reading those bytes costs at all, so an op's time over it is what the op's own design
// costs. A reference rather than a hard bound: on reads of 0.5 GB and more, cuDNN's decode runs
// slightly under it. `attnkit bench` reports it beside the decode rows.
#pragma once

#include <cstddef>
#include <vector>

#include "attnkit/status.h"

namespace attnkit::testkit {

struct ReadSpan {
  const void* data = nullptr;  // device pointer, 16-byte aligned
  size_t bytes = 0;            // a multiple of 16
};

// How the loads enter L2: evict-first (ld.global.cs, the default: the read replaces its own lines
// rather than the ones L2 holds), or normal.
enum class ReadHint { kEvictFirst, kNormal };

// Enqueues one read of every span on the default stream (at most 4 spans). A build without CUDA
// returns Unsupported.
Status read_once(const std::vector<ReadSpan>& spans, ReadHint hint = ReadHint::kEvictFirst);

// The same read by the copy engine of each SM (sm_90+): bulk asynchronous copies (cp.async.bulk)
// of 16 KB chunks into a shared-memory ring, one CTA per SM keeping the whole ring in flight, so
// no load instruction per 16 bytes limits it. Where it is faster than read_once it is the better
// reference: a kernel that moves its bytes the same way can reach it. Unsupported before sm_90 and
// without CUDA.
Status read_once_bulk(const std::vector<ReadSpan>& spans);

}  // namespace attnkit::testkit
