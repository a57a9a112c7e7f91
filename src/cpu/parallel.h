// A minimal fork-join parallel_for over [0, n) on std::threads, for the CPU reference backend.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace attnkit::ref {

inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Calls fn(i) for every i in [0, n), work-stealing one index at a time across threads.
inline void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  const int t = std::max(1, std::min<int>(resolve_threads(threads), static_cast<int>(std::min<int64_t>(n, 1 << 20))));
  if (t <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (int k = 0; k < t - 1; ++k) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

}  // namespace attnkit::ref
