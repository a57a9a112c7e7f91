// Event timing of GPU calls, one method for every program that reports a time (`attnkit bench`,
// bench/gdn_bench), so that their numbers and the anchors' compare like for like.
#pragma once

#include <functional>
#include <vector>

#include "attnkit/status.h"

namespace attnkit::testkit {

enum class Flush {
  // Before each timed call, 256 MB of zeros are written over a scratch buffer, and the event pair
  // is put around the call alone: the method of triton.testing.do_bench, which times the anchors.
  // Each call starts with L2 full of other, dirty lines, and with the GPU busy up to its start, so
  // the host's cost per call does not show.
  kL2,
  // The calls are queued one after another, events between them: what a stream of calls costs
  // with warm caches and no host gaps.
  kNone,
};

// Runs fn(call index) `warmup` times, then `repeats` times, each timed with a pair of CUDA events
// on the default stream; per-call milliseconds go to *ms. Stops at the first failing call. A build
// without CUDA returns Unsupported.
Status time_calls(const std::function<Status(int)>& fn, int warmup, int repeats, Flush flush,
                  std::vector<double>* ms);

// The median of the times (the mean of the middle two for an even count); NaN for none.
double median_ms(std::vector<double> ms);

}  // namespace attnkit::testkit
