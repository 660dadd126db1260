// CheckpointFollower: the thread behind jobs that follow a run being written. Every
// `interval` it lists each followed directory and adds the step directories that are new
// and whole (NewWholeCheckpoints: config.json and every weight file completely written) to
// their job, each step once; a checkpoint still being written is looked at again next time.
//
// New steps are resolved with the job's namespace's roots, as at submit. Errors (a
// directory that went away, a step outside the roots) are logged and retried; they never
// end the job. Thread-safe; `runner`, `store` and `server_files` are not owned and must
// outlive the follower.
#pragma once

#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/file_gate.h"
#include "server/jobs/job_runner.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class CheckpointFollower {
 public:
  CheckpointFollower(JobRunner* runner, storage::MetricsStore* store, const FileGate* server_files,
                     absl::Duration interval);
  ~CheckpointFollower();  // Stop.

  CheckpointFollower(const CheckpointFollower&) = delete;
  CheckpointFollower& operator=(const CheckpointFollower&) = delete;

  // Looks at every followed directory once, now. Blocks on file-system reads.
  void PollOnce();
  // Ends the thread after the poll in progress. Blocks; idempotent.
  void Stop();

 private:
  void Loop();
  // Adds `job`'s new whole steps to it.
  absl::Status Follow(const JobRunner::FollowedJob& job);

  JobRunner* runner_;
  storage::MetricsStore* store_;
  const FileGate* server_files_;
  absl::Duration interval_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace anisoscope::server
