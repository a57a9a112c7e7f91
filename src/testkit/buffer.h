// Owning host/device buffers for tests, the CLI's check command and benchmarks. Not part of the
// library's API: attnkit itself never allocates user tensors.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit::testkit {

bool cuda_available();          // a usable CUDA device exists (and the build has CUDA)
std::string cuda_device_name();  // "" without one
void cuda_synchronize();        // aborts with a message on error

// A contiguous tensor that owns its memory on the host or a CUDA device.
class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, std::vector<int64_t> shape, Device device = cpu());
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  TensorView view() const;
  void* data() const { return data_; }
  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  Device device() const { return device_; }
  bool empty() const { return numel() == 0; }

  // Copy to another device (same dtype and shape).
  Buffer to(Device device) const;

  // Host-side element access as float / int (copies device buffers back first).
  std::vector<float> to_float() const;
  std::vector<int32_t> to_int() const;
  // Fill from host values (rounded to the dtype), whatever the device.
  void from_float(const std::vector<float>& values);
  void from_int(const std::vector<int32_t>& values);

  // Fills every byte with 0xFF: NaN for every float dtype, -1 for int32.
  void poison();

 private:
  void release();
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  Device device_{};
};

// Random values, rounded to the buffer's dtype.
void fill_normal(Buffer& b, std::mt19937_64& rng, float mean = 0.f, float stddev = 1.f);
void fill_uniform(Buffer& b, std::mt19937_64& rng, float lo, float hi);

}  // namespace attnkit::testkit
