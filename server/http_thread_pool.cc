#include "server/http_thread_pool.h"

#include <algorithm>
#include <utility>

namespace anisoscope::server {

HttpThreadPool::HttpThreadPool(int min_threads, int max_threads, std::shared_ptr<PoolGauge> gauge)
    : max_threads_(std::max({1, min_threads, max_threads})), gauge_(std::move(gauge)) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < std::max(1, min_threads); ++i) StartThreadLocked();
}

HttpThreadPool::~HttpThreadPool() { shutdown(); }

void HttpThreadPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(fn));
    gauge_->waiting.fetch_add(1);
    if (!shutdown_ && idle_ < static_cast<int>(tasks_.size()) &&
        static_cast<int>(threads_.size()) < max_threads_) {
      StartThreadLocked();
    }
  }
  ready_.notify_one();
}

void HttpThreadPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void HttpThreadPool::StartThreadLocked() {
  threads_.emplace_back([this] { Work(); });
  gauge_->threads.store(static_cast<int>(threads_.size()));
}

void HttpThreadPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      ready_.wait(lock, [this] { return !tasks_.empty() || shutdown_; });
      --idle_;
      if (tasks_.empty()) return;  // shut down with nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      gauge_->waiting.fetch_sub(1);
    }
    gauge_->busy.fetch_add(1);
    task();
    gauge_->busy.fetch_sub(1);
  }
}

int DefaultHttpThreads() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(128, 32 * cores);
}

}  // namespace anisoscope::server
