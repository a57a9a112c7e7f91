#include "api/check.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <utility>

#include "api/device_copy.h"

namespace attnkit::detail {

std::string shape_str(const TensorView& t) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < std::min(t.ndim, kMaxDims); ++i) os << (i ? ", " : "") << t.shape[i];
  if (t.ndim > kMaxDims) os << ", ...";
  os << "]";
  return os.str();
}

Status require_defined(const TensorView& t, const char* name) {
  if (!t.defined()) return Status::Invalid(std::string(name) + " is required but was not given");
  return Status::Ok();
}

Status require_rank(const TensorView& t, const char* name, int rank) {
  if (t.ndim != rank)
    return Status::Invalid(std::string(name) + " must have " + std::to_string(rank) +
                           " dimensions, got " + std::to_string(t.ndim) + " " + shape_str(t));
  return Status::Ok();
}

Status require_dtype(const TensorView& t, const char* name, std::initializer_list<DType> allowed) {
  std::string list;
  for (DType d : allowed) {
    if (d == t.dtype) return Status::Ok();
    list += (list.empty() ? "" : " or ") + std::string(to_string(d));
  }
  return Status::Invalid(std::string(name) + " has dtype " + to_string(t.dtype) + ", expected " +
                         list);
}

Status require_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> expected) {
  return require_shape(t, name, std::vector<int64_t>(expected));
}

Status require_shape(const TensorView& t, const char* name, const std::vector<int64_t>& expected) {
  bool ok = t.ndim == static_cast<int>(expected.size());
  std::ostringstream want;
  want << "[";
  int i = 0;
  for (int64_t e : expected) {
    want << (i ? ", " : "") << (e < 0 ? std::string("*") : std::to_string(e));
    if (ok && e >= 0 && t.shape[i] != e) ok = false;
    ++i;
  }
  want << "]";
  if (!ok)
    return Status::Invalid(std::string(name) + " has shape " + shape_str(t) + ", expected " +
                           want.str());
  return Status::Ok();
}

Status require_last_dim_contiguous(const TensorView& t, const char* name) {
  if (t.ndim > 0 && t.shape[t.ndim - 1] > 1 && t.stride[t.ndim - 1] != 1)
    return Status::Invalid(std::string(name) + " must be contiguous in its last dimension (stride " +
                           std::to_string(t.stride[t.ndim - 1]) + ")");
  return Status::Ok();
}

Status require_valid_layout(const TensorView& t, const char* name) {
  if (t.ndim < 0 || t.ndim > kMaxDims)
    return Status::Invalid(std::string(name) + " has " + std::to_string(t.ndim) +
                           " dimensions; at most " + std::to_string(kMaxDims) + " are supported");
  int64_t numel = 1, last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      return Status::Invalid(std::string(name) + " has a negative size in dimension " +
                             std::to_string(i));
    if (t.stride[i] < 0)
      return Status::Invalid(std::string(name) + " has a negative stride in dimension " +
                             std::to_string(i));
    if (t.shape[i] > kMaxExtent)
      return Status::Invalid(std::string(name) + " has size " + std::to_string(t.shape[i]) +
                             " in dimension " + std::to_string(i) + "; sizes must stay below 2^31");
    // The element count and the largest offset stay below 2^62 (checked before each step).
    constexpr int64_t kLimit = int64_t{1} << 62;
    if (t.shape[i] > 0 && numel > kLimit / t.shape[i])
      return Status::Invalid(std::string(name) + " has more than 2^62 elements");
    numel *= t.shape[i];
    if (t.shape[i] > 1 && t.stride[i] > (kLimit - last) / (t.shape[i] - 1))
      return Status::Invalid(std::string(name) + " spans more than 2^62 elements");
    if (t.shape[i] > 1) last += (t.shape[i] - 1) * t.stride[i];
  }
  return Status::Ok();
}

Status require_same_device(const TensorView& t, const char* name, const Device& dev) {
  if (dev.type != DeviceType::kCPU && dev.type != DeviceType::kCUDA)
    return Status::Invalid("the tensors are on an unknown device type (" +
                           std::to_string(static_cast<int>(dev.type)) + "); cpu or cuda expected");
  if (!(t.device == dev))
    return Status::Invalid(std::string(name) + " is on " + t.describe() +
                           ", but the other tensors are on " +
                           (dev.type == DeviceType::kCPU ? std::string("cpu")
                                                          : "cuda:" + std::to_string(dev.index)));
  return Status::Ok();
}

Status require_vector_aligned(const TensorView& t, const char* name) {
  const size_t es = dtype_size(t.dtype);
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return Status::Invalid(std::string(name) + " must be 16-byte aligned for the GPU kernels");
  for (int i = 0; i + 1 < t.ndim; ++i)
    if ((t.stride[i] * es) % 16 != 0 && t.shape[i] > 1)
      return Status::Invalid(std::string(name) + " stride of dimension " + std::to_string(i) +
                             " must be a multiple of 16 bytes for the GPU kernels");
  return Status::Ok();
}

Status require_data(const TensorView& t, const char* name) {
  if (t.numel() > 0 && t.data == nullptr)
    return Status::Invalid(std::string(name) + " has elements but a null data pointer");
  // Element loads from a pointer that is not a multiple of the element size are undefined
  // behaviour on the host and fault on the GPU.
  if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) != 0)
    return Status::Invalid(std::string(name) + " is not aligned to its element size (" +
                           std::to_string(dtype_size(t.dtype)) + " bytes)");
  return Status::Ok();
}

Status read_int32(const TensorView& t, const char* name, void* stream, std::vector<int32_t>* out) {
  ATTNKIT_RETURN_IF_ERROR(require_dtype(t, name, {DType::kInt32}));
  ATTNKIT_RETURN_IF_ERROR(require_valid_layout(t, name));
  const int64_t n = t.numel();
  if (n > kMaxHostIndexElements)
    return Status::Invalid(std::string(name) + " has " + std::to_string(n) +
                           " elements, more than the 2^28 an index tensor may have");
  out->assign(static_cast<size_t>(n), 0);
  if (n == 0) return Status::Ok();
  // Copy the smallest span that covers every element, then gather with the strides.
  int64_t span = 1;
  for (int i = 0; i < t.ndim; ++i) span += (t.shape[i] - 1) * t.stride[i];
  std::vector<int32_t> raw;
  const int32_t* src = static_cast<const int32_t*>(t.data);
  if (t.device.type == DeviceType::kCUDA) {
    raw.resize(static_cast<size_t>(span));
    ATTNKIT_RETURN_IF_ERROR(copy_device_to_host(raw.data(), t.data, span * sizeof(int32_t),
                                                t.device.index, stream));
    src = raw.data();
  }
  std::vector<int64_t> idx(t.ndim, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int d = 0; d < t.ndim; ++d) off += idx[d] * t.stride[d];
    (*out)[e] = src[off];
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  (void)name;
  return Status::Ok();
}

Status check_cu_seqlens(const std::vector<int32_t>& cu, const char* name, int64_t total) {
  if (cu.empty()) return Status::Invalid(std::string(name) + " must have at least one entry");
  if (cu[0] != 0)
    return Status::Invalid(std::string(name) + "[0] must be 0, got " + std::to_string(cu[0]));
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      return Status::Invalid(std::string(name) + " must be non-decreasing, but entry " +
                             std::to_string(i) + " (" + std::to_string(cu[i]) + ") < entry " +
                             std::to_string(i - 1) + " (" + std::to_string(cu[i - 1]) + ")");
  if (cu.back() > total)
    return Status::Invalid(std::string(name) + " ends at " + std::to_string(cu.back()) +
                           ", past the " + std::to_string(total) + " rows of the tensor");
  return Status::Ok();
}

namespace {

// Bytes from the first element's address to one past the last one's (strides >= 0; a valid
// layout's largest offset is below 2^62 elements, so the bytes fit in 64 unsigned bits).
uint64_t span_bytes(const TensorView& t) {
  uint64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return 0;
    last += static_cast<uint64_t>(t.shape[i] - 1) * static_cast<uint64_t>(t.stride[i]);
  }
  return (last + 1) * dtype_size(t.dtype);
}

// Dims of size > 1 as (stride, size), smallest stride first.
std::vector<std::pair<int64_t, int64_t>> sorted_dims(const TensorView& t) {
  std::vector<std::pair<int64_t, int64_t>> d;
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 1) d.emplace_back(t.stride[i], t.shape[i]);
  std::sort(d.begin(), d.end());
  return d;
}

// Every element at its own address: each stride exceeds the span of the dims below it.
bool self_disjoint(const TensorView& t) {
  int64_t span = 0;  // largest offset the smaller dims reach
  for (const auto& [stride, size] : sorted_dims(t)) {
    if (stride <= span) return false;
    span += (size - 1) * stride;
  }
  return true;
}

// Elements tile their range: each stride equals the element count of the dims below it.
bool dense(const TensorView& t) {
  int64_t expect = 1;
  for (const auto& [stride, size] : sorted_dims(t)) {
    if (stride != expect) return false;
    expect *= size;
  }
  return true;
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i] || (a.shape[i] > 1 && a.stride[i] != b.stride[i])) return false;
  return true;
}

}  // namespace

Status require_no_self_overlap(const TensorView& out, const char* name) {
  if (!out.defined() || out.numel() == 0 || self_disjoint(out)) return Status::Ok();
  return Status::Invalid(std::string(name) + " " + shape_str(out) +
                         " has elements that share an address (strides cannot keep them apart); "
                         "outputs must not overlap themselves");
}

Status require_disjoint(const TensorView& out, const char* out_name, const TensorView& other,
                        const char* other_name) {
  if (!out.defined() || !other.defined() || out.device.type != other.device.type ||
      out.device.index != other.device.index)
    return Status::Ok();
  const uint64_t n_out = span_bytes(out), n_other = span_bytes(other);
  if (n_out == 0 || n_other == 0) return Status::Ok();
  const uint64_t a = reinterpret_cast<uintptr_t>(out.data);
  const uint64_t b = reinterpret_cast<uintptr_t>(other.data);
  // [a, a + n_out) and [b, b + n_other) meet; differences instead of ends, which could wrap.
  const bool ranges_meet = a <= b ? b - a < n_out : a - b < n_other;
  // Ranges that meet share elements when both views are dense, or when they are the same view.
  if (!ranges_meet || (!(dense(out) && dense(other)) && !same_view(out, other)))
    return Status::Ok();
  return Status::Invalid(std::string(out_name) + " shares memory with " + other_name +
                         "; outputs must not overlap inputs or other outputs (no in-place calls)");
}

Status require_outputs_apart(std::initializer_list<NamedView> outputs,
                             std::initializer_list<NamedView> inputs,
                             std::initializer_list<InPlace> in_place) {
  auto allowed = [&](const TensorView* out, const TensorView* in) {
    for (const InPlace& ip : in_place)
      if (ip.first == out && ip.second == in) return same_view(*out, *in);
    return false;
  };
  for (auto o = outputs.begin(); o != outputs.end(); ++o) {
    ATTNKIT_RETURN_IF_ERROR(require_no_self_overlap(*o->first, o->second));
    for (auto other = outputs.begin(); other != o; ++other)
      ATTNKIT_RETURN_IF_ERROR(require_disjoint(*o->first, o->second, *other->first, other->second));
    for (const NamedView& in : inputs)
      if (!allowed(o->first, in.first))
        ATTNKIT_RETURN_IF_ERROR(require_disjoint(*o->first, o->second, *in.first, in.second));
  }
  return Status::Ok();
}

}  // namespace attnkit::detail
