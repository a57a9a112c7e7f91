// Small helpers for argument validation: each returns a Status naming the argument.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <initializer_list>
#include <string>
#include <utility>
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
Status require_shape(const TensorView& t, const char* name, const std::vector<int64_t>& expected);
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

// Aliasing (the API's promise, attention.h): an output shares no memory with an input or with
// another output, and no two of its own elements share an address. Checked on layouts that passed
// require_valid_layout (strides >= 0):
//   - require_no_self_overlap: refused when the strides cannot keep the elements apart (a stride-0
//     dimension of size > 1, or, dims sorted by stride, a stride at or below the span of the
//     smaller ones);
//   - require_disjoint: refused when the two views' address ranges intersect and both are dense
//     (their elements fill their ranges, so intersecting ranges share elements), or when they are
//     the same view. Other strided views with gaps whose ranges interleave are not checked
//     (telling them apart is costly); writing into such an overlap is the caller's error, with
//     undefined results.
Status require_no_self_overlap(const TensorView& out, const char* name);
Status require_disjoint(const TensorView& out, const char* out_name, const TensorView& other,
                        const char* other_name);
// Both checks over a call: each output against itself, the other outputs and every input
// (undefined views are skipped). A pair in `in_place` (output, input) may instead be the very same
// view (same address, dtype, shape and strides): an in-place update the op's header allows
// (gdn.h: final_state may be initial_state).
using NamedView = std::pair<const TensorView*, const char*>;
using InPlace = std::pair<const TensorView*, const TensorView*>;
Status require_outputs_apart(std::initializer_list<NamedView> outputs,
                             std::initializer_list<NamedView> inputs,
                             std::initializer_list<InPlace> in_place = {});

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
