// Runs fn(0) ... fn(n - 1) on up to `threads` threads and waits for all of them: the
// per-step listings of a series are independent GETs. fn must be thread-safe; it is never
// called twice for one index. Blocks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace anisoscope::listing {

template <typename Fn>
void ParallelFor(size_t n, int threads, const Fn& fn) {
  const size_t count = std::min(n, static_cast<size_t>(std::max(threads, 1)));
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < count; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace anisoscope::listing
