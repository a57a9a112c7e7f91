// attnkit._C: the nanobind extension under the Python package. Arrays come in through DLPack (or
// the buffer protocol); outputs are allocated by the Python layer (attnkit/_ops.py).
#include <nanobind/stl/string.h>

#include "arrays.h"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "attnkit's C++ API; use the functions of the attnkit package instead.";
  m.attr("__version__") = attnkit::version();
  m.def("build_info", [] {
    nb::dict d;
    d["version"] = attnkit::version();
    d["cuda"] = attnkit::built_with_cuda();
    d["cuda_archs"] = attnkit::cuda_architectures();
    d["kernels"] = attnkit::kernel_filter();
    return d;
  });
  attnkit::py::bind_attention(m);
  attnkit::py::bind_gdn(m);
}
