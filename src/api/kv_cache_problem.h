// The validated description of one append_kv_cache call; backends read it instead of the views.
#pragma once

#include <cstdint>
#include <vector>

#include "api/kv_scale.h"
#include "attnkit/kv_cache.h"

namespace attnkit::detail {

struct AppendKvProblem {
  int64_t tokens = 0, hkv = 0, dk = 0, dv = 0;
  bool has_v = true;  // false: K alone (no v / v_cache; dv 0)
  int64_t num_pages = 0, page_size = 0;
  bool fp8 = false;
  KvScaleKind k_scale = KvScaleKind::kNone, v_scale = KvScaleKind::kNone;
  Device device{};
  bool slots_on_host = false;
  std::vector<int32_t> slots;  // present with slots_on_host

  int64_t capacity() const { return num_pages * page_size; }
};

Status validate_append_kv(const AppendKvArgs& args, const ExecOptions& opts, AppendKvProblem* p);

}  // namespace attnkit::detail
