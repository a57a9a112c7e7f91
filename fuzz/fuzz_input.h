// What every fuzz target builds its arguments from: the input bytes as a stream (Bytes), and
// tensors that each own an allocation of exactly the elements their strides reach (Owned), so
// that AddressSanitizer reports any access outside a tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "attnkit/options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit::fuzz {

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int pick(int hi) { return hi <= 0 ? 0 : next() % (hi + 1); }  // 0..hi
};

// One tensor: its own allocation of exactly the elements its strides reach.
struct Owned {
  std::vector<uint8_t> mem;
  attnkit::TensorView view;
};

inline Owned make(attnkit::DType dt, std::vector<int64_t> shape, int64_t pad, Bytes& in) {
  Owned o;
  const int nd = static_cast<int>(shape.size());
  std::vector<int64_t> stride(nd, 1);
  for (int i = nd - 2; i >= 0; --i)
    stride[i] = stride[i + 1] * (shape[i + 1] + (i + 1 == nd - 1 ? pad : 0));
  int64_t span = 1;
  for (int i = 0; i < nd; ++i) {
    if (shape[i] == 0) span = 0;
    if (span) span += (shape[i] - 1) * stride[i];
  }
  const size_t es = attnkit::dtype_size(dt);
  o.mem.resize(static_cast<size_t>(span) * es);
  for (auto& b : o.mem) b = in.next() & (dt == attnkit::DType::kFloat8E4M3 ? 0x77 : 0x3f);
  o.view.data = o.mem.empty() ? nullptr : o.mem.data();
  o.view.dtype = dt;
  o.view.ndim = nd;
  for (int i = 0; i < nd; ++i) {
    o.view.shape[i] = shape[i];
    o.view.stride[i] = stride[i];
  }
  return o;
}

// A tensor laid out in memory as `stored` (row-major, padded like make), viewed with its dims
// permuted: view dim i is stored dim perm[i].
inline Owned make_perm(attnkit::DType dt, std::vector<int64_t> stored, std::vector<int> perm,
                       int64_t pad, Bytes& in) {
  Owned o = make(dt, stored, pad, in);
  const attnkit::TensorView s = o.view;
  for (size_t i = 0; i < perm.size(); ++i) {
    o.view.shape[i] = s.shape[perm[i]];
    o.view.stride[i] = s.stride[perm[i]];
  }
  return o;
}

// An int32 index tensor with contents straight from the input (small values, some negative).
inline Owned ints(std::vector<int64_t> shape, Bytes& in) {
  Owned o = make(attnkit::DType::kInt32, std::move(shape), 0, in);
  auto* v = reinterpret_cast<int32_t*>(o.mem.data());
  for (size_t i = 0; i < o.mem.size() / 4; ++i) v[i] = static_cast<int8_t>(in.next()) / 2;
  return o;
}

// Every target runs the CPU backend on one thread.
inline attnkit::ExecOptions cpu_opts() {
  attnkit::ExecOptions opts;
  opts.backend = attnkit::Backend::kCPU;
  opts.cpu_threads = 1;
  return opts;
}

// ATTNKIT_FUZZ_REPORT=1: one status line per input (how many inputs get past validation), with
// the op it called where a target calls several.
inline void report(const attnkit::Status& st, const char* op = nullptr) {
  static const bool on = std::getenv("ATTNKIT_FUZZ_REPORT") != nullptr;
  if (on) std::fprintf(stderr, "status: %s%s%s\n", to_string(st.code()), op ? " " : "", op ? op : "");
}

}  // namespace attnkit::fuzz
