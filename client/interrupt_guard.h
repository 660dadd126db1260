// InterruptGuard: while it lives, the first SIGINT (Ctrl-C) or SIGTERM of the process runs
// `on_interrupt` once, on a thread of the guard's (the signal handler only writes to a
// pipe), and the default handlers come back so that a second one ends the process.
// One guard at a time; the destructor restores the handlers and joins the thread.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace anisoscope::client {

class InterruptGuard {
 public:
  explicit InterruptGuard(std::function<void()> on_interrupt);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  bool interrupted() const { return interrupted_; }

 private:
  void RestoreHandlers();

  std::function<void()> on_interrupt_;
  std::atomic<bool> interrupted_{false};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  std::thread thread_;
};

}  // namespace anisoscope::client
