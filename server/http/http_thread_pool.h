// HttpThreadPool: the HTTP server's task queue. httplib serves a connection on one thread
// from its first request until it closes, idle keep-alive waits included, so a fixed pool of
// N threads is held by N idle browsers while every other request waits. This pool starts a
// thread for each connection that finds none free, up to `max_threads`; beyond that,
// connections wait, and PoolGauge::waiting tells the handlers to close theirs after
// answering (Connection: close) so that the waiting ones get a thread within a request.
// At most `max_queued` wait: a connection beyond them is refused, its task run at once on
// the accepting thread with Refusing() true (the task must then answer without blocking,
// e.g. 503, and close; see ConnectionServer).
//
// Thread-safe. Threads are kept once started (an idle one blocks on a condition variable)
// and joined by shutdown().
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace anisoscope::server {

// What the pool is doing, read without a lock: `waiting` by the request handlers (to close
// connections), all three by /metrics.
struct PoolGauge {
  std::atomic<int> threads{0};
  std::atomic<int> busy{0};
  std::atomic<int> waiting{0};      // connections accepted that no thread serves yet
  std::atomic<int64_t> refused{0};  // connections refused since the start (max_queued)
};

class HttpThreadPool : public httplib::TaskQueue {
 public:
  // Starts `min_threads` threads (at least 1); `max_threads` >= min_threads; `max_queued`
  // >= 0.
  HttpThreadPool(int min_threads, int max_threads, int max_queued,
                 std::shared_ptr<PoolGauge> gauge);
  ~HttpThreadPool() override;  // shutdown()

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread. Idempotent.
  void shutdown() override;

  // True on the thread that runs a refused task, while it runs (see above).
  static bool Refusing();

 private:
  void StartThreadLocked();
  void Work();

  const int max_threads_;
  const int max_queued_;
  const std::shared_ptr<PoolGauge> gauge_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int running_ = 0;  // threads running a task
  bool shutdown_ = false;
};

// The number of request threads that follows the machine: 32 per core, at least 128. Each
// connection holds one (see above); the work itself is short and mostly waits on SQLite.
int DefaultHttpThreads();

}  // namespace anisoscope::server
