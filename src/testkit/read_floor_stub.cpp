// read_once in a build without CUDA.
#include "testkit/read_floor.h"

namespace attnkit::testkit {

Status read_once(const std::vector<ReadSpan>&, ReadHint) {
  return Status::Unsupported("this attnkit build has no CUDA support");
}

Status read_once_bulk(const std::vector<ReadSpan>&) {
  return Status::Unsupported("this attnkit build has no CUDA support");
}

}  // namespace attnkit::testkit
