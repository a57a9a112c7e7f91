// TensorView: a non-owning view of a strided tensor (pointer, dtype, shape, strides in elements,
// device). attnkit never allocates or frees the memory a view points to.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace attnkit {

// kFloat8E4M3: OCP e4m3 ("fn": no infinities, max finite 448), for FP8 KV caches.
enum class DType : uint8_t { kFloat32, kFloat16, kBFloat16, kInt32, kFloat8E4M3 };

size_t dtype_size(DType dt);
const char* to_string(DType dt);

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // CUDA ordinal; ignored for the CPU
  bool operator==(const Device&) const = default;
};

inline Device cpu() { return {DeviceType::kCPU, 0}; }
inline Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }

inline constexpr int kMaxDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int ndim = 0;  // 0 means "not given" for optional arguments
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> stride{};  // in elements
  Device device{};

  bool defined() const { return ndim > 0; }
  int64_t numel() const;
  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  int64_t stride_of(int dim) const { return stride[dim < 0 ? dim + ndim : dim]; }
  bool is_contiguous() const;
  std::string describe() const;  // e.g. "bf16[2, 128, 8, 64] on cuda:0"
};

// A view with row-major (contiguous) strides.
TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     Device device = cpu());
// A view with explicit strides (elements).
TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     std::initializer_list<int64_t> strides, Device device = cpu());

}  // namespace attnkit
