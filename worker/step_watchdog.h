// StepWatchdog: the deadline of the step a worker process is running, kept on a thread of
// its own.
//
// A step stuck where nothing polls (a regex that backtracks, a reader in a loop) cannot be
// interrupted inside the process, so past its deadline the watchdog calls `expired`, which
// reports the step failed and ends the process; its supervisor starts another
// (anisoscope-server does for its embedded workers). The deadline is --step-timeout when
// given; otherwise it is derived (StepDeadline): a floor plus the checkpoint's read at a slow
// disk's rate until the first batch is done, then a multiple of the step's projected length
// at the rate its own batches measured, so a model of any size gets the time its FLOPs need
// on this machine. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace anisoscope::worker {

// The derived deadline's parts (docs/security.md quotes them).
inline constexpr absl::Duration kStepFloor = absl::Seconds(120);
inline constexpr double kSlowReadBytesPerSecond = 20e6;  // a slow network disk
inline constexpr double kStepSlack = 4;  // times the projected length
// The exit code of a worker process that abandoned a step (already reported failed).
inline constexpr int kStepAbandonedExitCode = 3;

// The derived deadline of a step started at `start` on `checkpoint_bytes` of files, `done`
// of its `total` batches finished at `now` (0: none yet).
absl::Time StepDeadline(absl::Time start, uint64_t checkpoint_bytes, absl::Time now, int done,
                        int total);

class StepWatchdog {
 public:
  // Called on the watchdog's thread once per abandoned step: `why` names the bound and how
  // to raise it.
  using Expired = std::function<void(const std::string& why)>;

  // `timeout_seconds`: --step-timeout (0: derived).
  StepWatchdog(double timeout_seconds, Expired expired);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // A step begins on `checkpoint_bytes` of files.
  void Start(uint64_t checkpoint_bytes);
  // Batch `done` of `total` is finished: a derived deadline follows the measured rate.
  void Progress(int done, int total);
  // The step returned: nothing is watched until the next Start.
  void Finish();
  // The step's deadline now; InfiniteFuture between steps.
  absl::Time deadline() const;

 private:
  void Loop();

  const double timeout_seconds_;
  const Expired expired_;
  mutable absl::Mutex mu_;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time start_ ABSL_GUARDED_BY(mu_);
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace anisoscope::worker
