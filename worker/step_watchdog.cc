#include "worker/step_watchdog.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace anisoscope::worker {
namespace {

constexpr absl::Duration kTick = absl::Milliseconds(200);

}  // namespace

absl::Time StepDeadline(absl::Time start, uint64_t checkpoint_bytes, absl::Time now, int done,
                        int total) {
  const absl::Duration before_first_batch =
      kStepFloor + absl::Seconds(static_cast<double>(checkpoint_bytes) / kSlowReadBytesPerSecond);
  if (done <= 0 || total <= 0) return start + before_first_batch;
  const absl::Duration projected = (now - start) * (static_cast<double>(total) / done);
  return start + std::max(before_first_batch, projected * kStepSlack);
}

StepWatchdog::StepWatchdog(double timeout_seconds, Expired expired)
    : timeout_seconds_(timeout_seconds), expired_(std::move(expired)) {
  thread_ = std::thread([this] { Loop(); });
}

StepWatchdog::~StepWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void StepWatchdog::Start(uint64_t checkpoint_bytes) {
  absl::MutexLock lock(&mu_);
  watching_ = true;
  start_ = absl::Now();
  bytes_ = checkpoint_bytes;
  deadline_ = timeout_seconds_ > 0 ? start_ + absl::Seconds(timeout_seconds_)
                                   : StepDeadline(start_, bytes_, start_, 0, 0);
}

void StepWatchdog::Progress(int done, int total) {
  absl::MutexLock lock(&mu_);
  if (!watching_ || timeout_seconds_ > 0) return;
  deadline_ = StepDeadline(start_, bytes_, absl::Now(), done, total);
}

void StepWatchdog::Finish() {
  absl::MutexLock lock(&mu_);
  watching_ = false;
  deadline_ = absl::InfiniteFuture();
}

absl::Time StepWatchdog::deadline() const {
  absl::MutexLock lock(&mu_);
  return deadline_;
}

void StepWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop), kTick);
    if (stopping_ || !watching_) continue;
    const absl::Time now = absl::Now();
    if (now < deadline_) continue;
    const std::string why =
        timeout_seconds_ > 0
            ? absl::StrFormat(
                  "the step ran past --step-timeout (%g s) and was stopped; raise "
                  "--step-timeout on the worker (on anisoscope-server for its embedded "
                  "workers) if the checkpoint is legitimate",
                  timeout_seconds_)
            : absl::StrFormat(
                  "the step ran %.0f s, past its deadline (derived from its checkpoint's size "
                  "and its batches' measured rate), and was stopped; set --step-timeout on the "
                  "worker (on anisoscope-server for its embedded workers) if the checkpoint is "
                  "legitimate",
                  absl::ToDoubleSeconds(now - start_));
    watching_ = false;
    mu_.Unlock();
    expired_(why);
    mu_.Lock();
  }
}

}  // namespace anisoscope::worker
