// read_once in a build without CUDA.
#include "testkit/read_floor.h"

namespace attnkit::testkit {

Status read_once(const std::vector<ReadSpan>&, ReadHint) {
  return Status::Unsupported("this attnkit build has no CUDA support");
}

}  // namespace attnkit::testkit
