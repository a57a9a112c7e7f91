#include "arrays.h"

#include <string>

namespace attnkit::py {
namespace {

namespace dl = nb::dlpack;

// DLPack device types (dlpack.h): the CPU, a CUDA device, and pinned host memory (host-readable).
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;
// DLPack's type code for OCP e4m3 ("fn"), torch.float8_e4m3fn (dlpack.h kDLFloat8_e4m3fn).
constexpr uint8_t kDLFloat8E4M3Fn = 10;

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

bool to_dtype(dl::dtype t, DType* out) {
  if (t.lanes != 1) return false;
  const auto code = static_cast<dl::dtype_code>(t.code);
  if (code == dl::dtype_code::Float && t.bits == 32) *out = DType::kFloat32;
  else if (code == dl::dtype_code::Float && t.bits == 16) *out = DType::kFloat16;
  else if (code == dl::dtype_code::Bfloat && t.bits == 16) *out = DType::kBFloat16;
  else if (code == dl::dtype_code::Int && t.bits == 32) *out = DType::kInt32;
  else if (t.code == kDLFloat8E4M3Fn && t.bits == 8) *out = DType::kFloat8E4M3;
  // uint8 holds e4m3 bytes: vLLM keeps FP8 caches as uint8, and numpy and torch before DLPack's
  // float8 codes cannot export e4m3 otherwise. No attnkit tensor is uint8 in any other sense.
  else if (code == dl::dtype_code::UInt && t.bits == 8) *out = DType::kFloat8E4M3;
  else return false;
  return true;
}

std::string dtype_name(dl::dtype t) {
  const char* kind = "?";
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Int: kind = "int"; break;
    case dl::dtype_code::UInt: kind = "uint"; break;
    case dl::dtype_code::Float: kind = "float"; break;
    case dl::dtype_code::Bfloat: kind = "bfloat"; break;
    case dl::dtype_code::Complex: kind = "complex"; break;
    case dl::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  return std::string(kind) + std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

// Why `obj` is not an array attnkit can import: DLPack export's own error when it has one (e.g. a
// torch tensor that requires grad), else its type.
std::string why_not_array(nb::handle obj) {
  if (nb::hasattr(obj, "__dlpack__")) {
    try {
      nb::object capsule = obj.attr("__dlpack__")();
      (void)capsule;
    } catch (const nb::python_error& e) {
      return std::string("its DLPack export failed: ") + e.what();
    }
  }
  return std::string("got ") + nb::type_name(obj.type()).c_str();
}

// torch tensors export through torch._C._to_dlpack: the Tensor.__dlpack__ method nanobind would
// call is Python code about ten times as costly per tensor, and engines count the host cost of
// every call. Looked up once torch has been imported.
class TorchExport {
 public:
  // A DLPack capsule of `obj` if it is a torch tensor, else an invalid object.
  nb::object capsule(nb::handle obj) {
    if (tensor_type_ == nullptr && !lookup()) return {};
    if (!PyObject_TypeCheck(obj.ptr(), tensor_type_)) return {};
    return to_dlpack_(obj);
  }

 private:
  bool lookup() {
    PyObject* modules = PyImport_GetModuleDict();
    PyObject* torch = PyDict_GetItemString(modules, "torch");  // borrowed
    if (torch == nullptr) return false;
    nb::handle t(torch);
    if (!nb::hasattr(t, "Tensor") || !nb::hasattr(t, "_C")) return false;  // torch half-imported
    nb::object c = t.attr("_C");
    if (!nb::hasattr(c, "_to_dlpack")) return false;
    to_dlpack_ = c.attr("_to_dlpack");
    type_ = t.attr("Tensor");
    tensor_type_ = reinterpret_cast<PyTypeObject*>(type_.ptr());
    return true;
  }
  PyTypeObject* tensor_type_ = nullptr;
  nb::object type_, to_dlpack_;
};

TorchExport& torch_export() {
  static TorchExport* e = new TorchExport();  // never destroyed: Python objects outlive exit order
  return *e;
}

}  // namespace

template <class Array>
TensorView ArrayScope::view(const Array& a, const char* name) {
  TensorView t;
  if (!to_dtype(a.dtype(), &t.dtype))
    raise(PyExc_ValueError, std::string(name) + ": dtype " + dtype_name(a.dtype()) +
                                " is not supported (float32, float16, bfloat16, int32)");
  const int ndim = static_cast<int>(a.ndim());
  if (ndim < 1 || ndim > kMaxDims)
    raise(PyExc_ValueError, std::string(name) + ": " + std::to_string(ndim) +
                                " dimensions; attnkit takes arrays of 1 to " +
                                std::to_string(kMaxDims) + " dimensions");
  switch (a.device_type()) {
    case kDLCPU:
    case kDLCUDAHost: t.device = cpu(); break;
    case kDLCUDA: t.device = cuda(a.device_id()); break;
    default:
      raise(PyExc_ValueError, std::string(name) + ": arrays on DLPack device type " +
                                  std::to_string(a.device_type()) +
                                  " are not supported (host memory or a CUDA device)");
  }
  t.ndim = ndim;
  for (int i = 0; i < ndim; ++i) {
    t.shape[i] = static_cast<int64_t>(a.shape(i));
    t.stride[i] = a.stride(i);
  }
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return t;
}

TensorView ArrayScope::in(nb::handle obj, const char* name) {
  if (obj.is_none()) return {};
  nb::ndarray<nb::ro> a;
  nb::object capsule = torch_export().capsule(obj);
  if (!nb::try_cast(capsule.is_valid() ? nb::handle(capsule) : obj, a, /*convert=*/false))
    raise(PyExc_ValueError, std::string(name) + ": expected an array (DLPack or buffer protocol); " +
                                why_not_array(obj));
  inputs_.push_back(a);
  return view(a, name);
}

TensorView ArrayScope::out(nb::handle obj, const char* name) {
  if (obj.is_none()) return {};
  nb::ndarray<> a;
  nb::object capsule = torch_export().capsule(obj);
  if (!nb::try_cast(capsule.is_valid() ? nb::handle(capsule) : obj, a, /*convert=*/false))
    raise(PyExc_ValueError, std::string(name) +
                                ": expected a writable array (DLPack or buffer protocol); " +
                                why_not_array(obj) + " (a read-only array cannot receive an output)");
  outputs_.push_back(a);
  return view(a, name);
}

void throw_if_error(const Status& s) {
  if (s.ok()) return;
  switch (s.code()) {
    case StatusCode::kInvalidArgument: raise(PyExc_ValueError, s.message());
    case StatusCode::kUnsupported: raise(PyExc_NotImplementedError, s.message());
    default: raise(PyExc_RuntimeError, std::string(to_string(s.code())) + ": " + s.message());
  }
}

ExecOptions exec_options(const std::string& backend, uintptr_t stream, bool validate_indices,
                         int cpu_threads) {
  ExecOptions o;
  if (backend == "auto") o.backend = Backend::kAuto;
  else if (backend == "cpu") o.backend = Backend::kCPU;
  else if (backend == "cuda-portable") o.backend = Backend::kCudaPortable;
  else if (backend == "cuda-sm90") o.backend = Backend::kCudaSm90;
  else
    raise(PyExc_ValueError, "backend: '" + backend +
                                "' is not one of 'auto', 'cpu', 'cuda-portable', 'cuda-sm90'");
  o.stream = reinterpret_cast<void*>(stream);
  o.validate_device_indices = validate_indices;
  if (cpu_threads < 0) raise(PyExc_ValueError, "cpu_threads must be >= 0 (0 = all cores)");
  o.cpu_threads = cpu_threads;
  return o;
}

}  // namespace attnkit::py
