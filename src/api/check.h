// Small helpers for argument validation: each returns a Status naming the argument.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <initializer_list>
#include <string>
#include <vector>

#include "attnkit/options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit::detail {

std::string shape_str(const TensorView& t);

Status require_defined(const TensorView& t, const char* name);
Status require_rank(const TensorView& t, const char* name, int rank);
Status require_dtype(const TensorView& t, const char* name, std::initializer_list<DType> allowed);
// shape must equal `expected`; -1 entries match anything.
Status require_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> expected);
Status require_last_dim_contiguous(const TensorView& t, const char* name);
// At most kMaxDims dims, every size in [0, kMaxExtent], strides >= 0, and the element count and
// the largest element offset below 2^62 (so that int arithmetic on a size and int64 arithmetic on
// offsets never overflow).
inline constexpr int64_t kMaxExtent = (int64_t{1} << 31) - 1;
Status require_valid_layout(const TensorView& t, const char* name);
// t on `dev`, and `dev` a CPU or CUDA device (any other type would be read as host memory).
Status require_same_device(const TensorView& t, const char* name, const Device& dev);
// 16-byte aligned base pointer and outer strides, as vectorised GPU loads need.
Status require_vector_aligned(const TensorView& t, const char* name);
// Tensor must have a non-null pointer when it has elements, aligned to its element size.
Status require_data(const TensorView& t, const char* name);

// Runs a public entry point's body: a C++ exception from the standard library (a host allocation
// that fails on sizes the arguments claim, say) becomes a Status instead of terminating the caller.
template <class Body>
Status guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status::Internal("out of host memory");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("unexpected exception: ") + e.what());
  }
}

// Reads an int32 tensor (any strides, any device) into a host vector, row-major. For CUDA tensors
// this copies on `stream` and synchronises it. More than kMaxHostIndexElements elements is refused
// (an index tensor that claims billions of entries is an error, not a reason to allocate).
inline constexpr int64_t kMaxHostIndexElements = int64_t{1} << 28;
Status read_int32(const TensorView& t, const char* name, void* stream, std::vector<int32_t>* out);

// cu_seqlens checks: starts at 0, non-decreasing, last entry <= total.
Status check_cu_seqlens(const std::vector<int32_t>& cu, const char* name, int64_t total);

// Element offset of a multi-index.
inline int64_t offset_of(const TensorView& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx) off += i * t.stride[d++];
  return off;
}

}  // namespace attnkit::detail
