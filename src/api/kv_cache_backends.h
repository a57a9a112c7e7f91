// Backend entry points for append_kv_cache; each receives validated arguments and the problem.
#pragma once

#include "api/kv_cache_problem.h"

namespace attnkit::detail {

Status cpu_append_kv(const AppendKvArgs& args, const AppendKvProblem& p, const ExecOptions& opts);
#ifdef ATTNKIT_WITH_CUDA
Status cuda_append_kv(const AppendKvArgs& args, const AppendKvProblem& p, const ExecOptions& opts);
#endif

}  // namespace attnkit::detail
