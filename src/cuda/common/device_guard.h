// Makes the tensors' CUDA device current for a call's launches and restores the caller's device
// afterwards, so multi-GPU callers never see attnkit change their current device.
#pragma once

#include <cuda_runtime.h>

namespace attnkit::detail {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) return;
    ok_ = prev_ == device || cudaSetDevice(device) == cudaSuccess;
    restore_ = ok_ && prev_ != device;
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  int prev_ = 0;
  bool ok_ = false;
  bool restore_ = false;
};

}  // namespace attnkit::detail
