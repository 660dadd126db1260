#include "server/http/http_thread_pool.h"

#include <algorithm>
#include <utility>

namespace anisoscope::server {

namespace {
thread_local bool t_refusing = false;
}  // namespace

HttpThreadPool::HttpThreadPool(int min_threads, int max_threads, int max_queued,
                               std::shared_ptr<PoolGauge> gauge)
    : max_threads_(std::max({1, min_threads, max_threads})),
      max_queued_(std::max(0, max_queued)),
      gauge_(std::move(gauge)) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < std::max(1, min_threads); ++i) StartThreadLocked();
}

HttpThreadPool::~HttpThreadPool() { shutdown(); }

bool HttpThreadPool::Refusing() { return t_refusing; }

void HttpThreadPool::enqueue(std::function<void()> fn) {
  bool refuse = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Threads not running a task (idle, or started and not yet waiting) take the queued
    // tasks first; with this one, the rest wait.
    const int free_threads = static_cast<int>(threads_.size()) - running_;
    const int would_wait = static_cast<int>(tasks_.size()) + 1 - free_threads;
    refuse =
        !shutdown_ && static_cast<int>(threads_.size()) >= max_threads_ && would_wait > max_queued_;
    if (!refuse) {
      tasks_.push_back(std::move(fn));
      gauge_->waiting.fetch_add(1);
      if (!shutdown_ && would_wait > 0 && static_cast<int>(threads_.size()) < max_threads_) {
        StartThreadLocked();
      }
    }
  }
  if (refuse) {  // run here, outside the lock: it answers without blocking
    gauge_->refused.fetch_add(1);
    t_refusing = true;
    fn();
    t_refusing = false;
    return;
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
  bool ran = false;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (ran) --running_;
      ready_.wait(lock, [this] { return !tasks_.empty() || shutdown_; });
      if (tasks_.empty()) return;  // shut down with nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
      gauge_->waiting.fetch_sub(1);
    }
    gauge_->busy.fetch_add(1);
    task();
    gauge_->busy.fetch_sub(1);
    ran = true;
  }
}

int DefaultHttpThreads() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(128, 32 * cores);
}

}  // namespace anisoscope::server
