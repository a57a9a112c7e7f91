#include "testkit/buffer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/half.h"

#ifdef ATTNKIT_WITH_CUDA
#include <cuda_runtime.h>
#define TK_CUDA(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "testkit: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
#endif

namespace attnkit::testkit {

bool cuda_available() {
#ifdef ATTNKIT_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
#else
  return false;
#endif
}

std::string cuda_device_name() {
#ifdef ATTNKIT_WITH_CUDA
  if (!cuda_available()) return "";
  cudaDeviceProp p;
  TK_CUDA(cudaGetDeviceProperties(&p, 0));
  return p.name;
#else
  return "";
#endif
}

void cuda_synchronize() {
#ifdef ATTNKIT_WITH_CUDA
  TK_CUDA(cudaDeviceSynchronize());
#endif
}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape, Device device)
    : dtype_(dtype), shape_(std::move(shape)), device_(device) {
  const size_t n = std::max<size_t>(bytes(), 16);  // never null, so views of empty tensors work
  if (device_.type == DeviceType::kCPU) {
    data_ = std::aligned_alloc(64, (n + 63) / 64 * 64);
  } else {
#ifdef ATTNKIT_WITH_CUDA
    TK_CUDA(cudaSetDevice(device_.index));
    TK_CUDA(cudaMalloc(&data_, n));
#else
    std::fprintf(stderr, "testkit: CUDA buffer requested in a build without CUDA\n");
    std::abort();
#endif
  }
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    dtype_ = o.dtype_;
    shape_ = std::move(o.shape_);
    device_ = o.device_;
    o.data_ = nullptr;
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!data_) return;
  if (device_.type == DeviceType::kCPU) {
    std::free(data_);
  } else {
#ifdef ATTNKIT_WITH_CUDA
    cudaFree(data_);
#endif
  }
  data_ = nullptr;
}

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return shape_.empty() ? 0 : n;
}

TensorView Buffer::view() const {
  TensorView t;
  t.data = data_;
  t.dtype = dtype_;
  t.ndim = static_cast<int>(shape_.size());
  t.device = device_;
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.shape[d] = shape_[d];
    t.stride[d] = st;
    st *= shape_[d];
  }
  return t;
}

static void copy_bytes(void* dst, Device dd, const void* src, Device sd, size_t n) {
  if (n == 0) return;
  if (dd.type == DeviceType::kCPU && sd.type == DeviceType::kCPU) {
    std::memcpy(dst, src, n);
    return;
  }
#ifdef ATTNKIT_WITH_CUDA
  TK_CUDA(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
#else
  std::abort();
#endif
}

Buffer Buffer::to(Device device) const {
  Buffer b(dtype_, shape_, device);
  copy_bytes(b.data_, device, data_, device_, bytes());
  return b;
}

std::vector<float> Buffer::to_float() const {
  Buffer h = device_.type == DeviceType::kCPU ? Buffer() : to(cpu());
  const TensorView v = device_.type == DeviceType::kCPU ? view() : h.view();
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    out[i] = dtype_ == DType::kInt32 ? static_cast<float>(static_cast<const int32_t*>(v.data)[i])
                                     : ref::load_float(v, i);
  return out;
}

std::vector<int32_t> Buffer::to_int() const {
  Buffer h = device_.type == DeviceType::kCPU ? Buffer() : to(cpu());
  const void* p = device_.type == DeviceType::kCPU ? data_ : h.data_;
  std::vector<int32_t> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
  return out;
}

void Buffer::from_float(const std::vector<float>& values) {
  Buffer h(dtype_, shape_, cpu());
  const TensorView v = h.view();
  for (int64_t i = 0; i < numel() && i < static_cast<int64_t>(values.size()); ++i)
    ref::store_float(v, i, values[i]);
  copy_bytes(data_, device_, h.data_, cpu(), bytes());
}

void Buffer::from_int(const std::vector<int32_t>& values) {
  std::vector<int32_t> tmp(values);
  tmp.resize(static_cast<size_t>(numel()), 0);
  copy_bytes(data_, device_, tmp.data(), cpu(), bytes());
}

void Buffer::poison() {
  if (device_.type == DeviceType::kCPU) {
    std::memset(data_, 0xFF, bytes());
  } else {
#ifdef ATTNKIT_WITH_CUDA
    TK_CUDA(cudaMemset(data_, 0xFF, bytes()));
#endif
  }
}

void fill_normal(Buffer& b, std::mt19937_64& rng, float mean, float stddev) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(static_cast<size_t>(b.numel()));
  for (auto& x : v) x = d(rng);
  b.from_float(v);
}

void fill_uniform(Buffer& b, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(b.numel()));
  for (auto& x : v) x = d(rng);
  b.from_float(v);
}

}  // namespace attnkit::testkit
