// Which kernels this build compiles ("build what you ship"): CMake's ATTNKIT_KERNEL_HEAD_DIMS and
// ATTNKIT_KERNEL_DTYPES (cmake/attnkit_kernel_filter.cmake) define ATTNKIT_KERNEL_D<dqk>_<dv> and
// ATTNKIT_KERNEL_<dtype> to 1 (kept) or 0, and compile only the kept instantiation TUs. The lists
// in this folder wrap their entries in ATTNKIT_IF_DIMS / ATTNKIT_IF_DTYPE, so an entry filtered out
// has no declaration, no dispatch row and no definition. Undefined flags mean kept.
#pragma once

#ifndef ATTNKIT_KERNEL_D64_64
#define ATTNKIT_KERNEL_D64_64 1
#endif
#ifndef ATTNKIT_KERNEL_D96_96
#define ATTNKIT_KERNEL_D96_96 1
#endif
#ifndef ATTNKIT_KERNEL_D128_128
#define ATTNKIT_KERNEL_D128_128 1
#endif
#ifndef ATTNKIT_KERNEL_D192_128
#define ATTNKIT_KERNEL_D192_128 1
#endif
#ifndef ATTNKIT_KERNEL_D192_192
#define ATTNKIT_KERNEL_D192_192 1
#endif
#ifndef ATTNKIT_KERNEL_D256_256
#define ATTNKIT_KERNEL_D256_256 1
#endif
#ifndef ATTNKIT_KERNEL_bf16
#define ATTNKIT_KERNEL_bf16 1
#endif
#ifndef ATTNKIT_KERNEL_fp16
#define ATTNKIT_KERNEL_fp16 1
#endif
// What the filter keeps, as text for messages ("" when it keeps everything).
#ifndef ATTNKIT_KERNEL_FILTER
#define ATTNKIT_KERNEL_FILTER ""
#endif

// ATTNKIT_IF_DIMS(128, 128)(tokens) is tokens when head dims 128/128 are kept, else nothing; the
// same for ATTNKIT_IF_DTYPE(bf16)(tokens). Each has its own helpers so that one may be used
// inside the other's argument.
#define ATTNKIT_KD_KEEP_1(...) __VA_ARGS__
#define ATTNKIT_KD_KEEP_0(...)
#define ATTNKIT_KD_KEEP_(flag) ATTNKIT_KD_KEEP_##flag
#define ATTNKIT_KD_KEEP(flag) ATTNKIT_KD_KEEP_(flag)
#define ATTNKIT_IF_DIMS(DQK, DV) ATTNKIT_KD_KEEP(ATTNKIT_KERNEL_D##DQK##_##DV)
#define ATTNKIT_KT_KEEP_1(...) __VA_ARGS__
#define ATTNKIT_KT_KEEP_0(...)
#define ATTNKIT_KT_KEEP_(flag) ATTNKIT_KT_KEEP_##flag
#define ATTNKIT_KT_KEEP(flag) ATTNKIT_KT_KEEP_(flag)
#define ATTNKIT_IF_DTYPE(DT) ATTNKIT_KT_KEEP(ATTNKIT_KERNEL_##DT)

#include <string>

namespace attnkit::detail {
// For refusals: what the filter keeps when it drops some kernels, else "".
inline std::string kernel_filter_note() {
  const std::string kept = ATTNKIT_KERNEL_FILTER;
  return kept.empty() ? std::string()
                      : " (this build compiles kernels for " + kept +
                            " only: ATTNKIT_KERNEL_HEAD_DIMS / ATTNKIT_KERNEL_DTYPES)";
}
}  // namespace attnkit::detail
