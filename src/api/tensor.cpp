#include "attnkit/status.h"
#include "attnkit/tensor.h"
#include "attnkit/options.h"

#include <sstream>

namespace attnkit {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kCudaError: return "CUDA error";
    case StatusCode::kInternal: return "internal error";
  }
  return "?";
}

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kFloat8E4M3: return 1;
  }
  return 0;
}

const char* to_string(DType dt) {
  switch (dt) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kInt32: return "int32";
    case DType::kFloat8E4M3: return "fp8e4m3";
  }
  return "?";
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kCPU: return "cpu";
    case Backend::kCudaPortable: return "cuda-portable";
    case Backend::kCudaSm90: return "cuda-sm90";
  }
  return "?";
}

int64_t TensorView::numel() const {
  if (ndim == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << to_string(dtype) << "[";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[i];
  os << "] on " << (device.type == DeviceType::kCPU ? "cpu" : "cuda:" + std::to_string(device.index));
  return os.str();
}

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int>(shape.size());
  t.device = device;
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = st;
    st *= t.shape[d];
  }
  return t;
}

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     std::initializer_list<int64_t> strides, Device device) {
  TensorView t = make_view(data, dtype, shape, device);
  int i = 0;
  for (int64_t s : strides) t.stride[i++] = s;
  return t;
}

}  // namespace attnkit
