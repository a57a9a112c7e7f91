// Arrays from Python: any DLPack producer (torch, numpy, JAX, CuPy, ...) becomes an attnkit
// TensorView for the length of one call, and a Status becomes a Python exception.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/attnkit.h"

namespace attnkit::py {

namespace nb = nanobind;

// Imports the arrays of one call and keeps them (and so their memory) alive until it returns.
// None gives an undefined view, which the C++ API reads as "not given".
class ArrayScope {
 public:
  ArrayScope() {
    inputs_.reserve(16);
    outputs_.reserve(4);
  }
  TensorView in(nb::handle obj, const char* name);   // read by the op
  TensorView out(nb::handle obj, const char* name);  // written by the op: must be writable

 private:
  template <class Array>
  TensorView view(const Array& a, const char* name);
  std::vector<nb::ndarray<nb::ro>> inputs_;
  std::vector<nb::ndarray<>> outputs_;
};

// Raises the Python exception of a failed Status: ValueError for bad arguments,
// NotImplementedError for requests no backend serves, RuntimeError for CUDA and internal errors.
void throw_if_error(const Status& s);

// backend: "auto", "cpu", "cuda-portable" or "cuda-sm90". stream: a cudaStream_t as an integer
// (0 = the legacy default stream).
ExecOptions exec_options(const std::string& backend, uintptr_t stream, bool validate_indices,
                         int cpu_threads);

// Releases the GIL around host-side work that may run long (the CPU backend); CUDA calls only
// enqueue, so they keep it.
class MaybeReleaseGil {
 public:
  explicit MaybeReleaseGil(const Device& d) {
    if (d.type == DeviceType::kCPU) state_ = PyEval_SaveThread();
  }
  ~MaybeReleaseGil() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  MaybeReleaseGil(const MaybeReleaseGil&) = delete;
  MaybeReleaseGil& operator=(const MaybeReleaseGil&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

// Runs `op()` (returning a Status) with the GIL released when `dev` is the host, and raises its
// error.
template <class Op>
void call(const Device& dev, Op op) {
  Status st;
  {
    MaybeReleaseGil gil(dev);
    st = op();
  }
  throw_if_error(st);
}

void bind_attention(nb::module_& m);
void bind_gdn(nb::module_& m);

}  // namespace attnkit::py
