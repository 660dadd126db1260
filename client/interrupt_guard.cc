#include "client/interrupt_guard.h"

#include <unistd.h>

namespace anisoscope::client {
namespace {

// The pipe the handler writes a signal byte to; the guard's thread reads it.
int g_pipe[2] = {-1, -1};
constexpr char kSignalled = 's';
constexpr char kStop = 'x';

void OnSignal(int /*signal_number*/) {
  const char byte = kSignalled;
  [[maybe_unused]] const ssize_t written = write(g_pipe[1], &byte, 1);
}

}  // namespace

InterruptGuard::InterruptGuard(std::function<void()> on_interrupt)
    : on_interrupt_(std::move(on_interrupt)) {
  if (pipe(g_pipe) != 0) return;  // no guard: Ctrl-C keeps its default meaning
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
  thread_ = std::thread([this] {
    char byte = 0;
    while (read(g_pipe[0], &byte, 1) == 1 && byte == kSignalled) {
      if (interrupted_.exchange(true)) continue;
      RestoreHandlers();  // a second Ctrl-C ends the process
      on_interrupt_();
    }
  });
}

InterruptGuard::~InterruptGuard() {
  if (!thread_.joinable()) return;
  RestoreHandlers();
  const char byte = kStop;
  [[maybe_unused]] const ssize_t written = write(g_pipe[1], &byte, 1);
  thread_.join();
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

void InterruptGuard::RestoreHandlers() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

}  // namespace anisoscope::client
