// CheckpointFollower: the thread behind jobs that follow a run being written. Every
// `interval` it lists each followed directory and adds the step directories that are new
// and whole (NewWholeCheckpoints: config.json and every weight file completely written) to
// their job, each step once; a checkpoint still being written is looked at again next time.
//
// New steps are resolved with the job's namespace's roots, as at submit. A followed remote
// source (issue 38) is listed again instead (its refs or its prefix, through the same
// allow-lists as at submit: server/jobs/source_steps.h) and each new step that is listed
// with its weight files is added once; a step the listing cannot use yet is looked at again
// next time. Only the refs or prefix are read again for the steps the job has: their trees
// or folders are not (SourceLister::List's skip_steps). A remote source is polled at most
// every kRemoteFollowInterval (30 s; `remote_interval`), however short `interval` is (nor
// more often than `interval`); PollOnce polls it now.
// Errors (a directory that went away, a step outside the roots, a listing that failed) are
// logged and retried. A source no longer allowed (PERMISSION_DENIED: an operator removed its
// --allow-source) ends the job: it is cancelled, the reason logged and audited, and it is
// followed no more.
// Thread-safe; `runner`, `store`, `server_files` and `sources` are not owned and must
// outlive the follower (`sources` may be null: followed sources then wait).
#pragma once

#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/file_gate.h"
#include "server/jobs/job_runner.h"
#include "server/sources/source_lister.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class CheckpointFollower {
 public:
  // The least time between two listings of one followed remote source: the Hub and S3 are
  // shared services that rate-limit (429), and a training run writes a step every minutes.
  static constexpr absl::Duration kRemoteFollowInterval = absl::Seconds(30);

  CheckpointFollower(JobRunner* runner, storage::MetricsStore* store, const FileGate* server_files,
                     absl::Duration interval, const SourceLister* sources = nullptr,
                     absl::Duration remote_interval = kRemoteFollowInterval);
  ~CheckpointFollower();  // Stop.

  CheckpointFollower(const CheckpointFollower&) = delete;
  CheckpointFollower& operator=(const CheckpointFollower&) = delete;

  // Looks at every followed directory and source once, now. Blocks on file-system reads and
  // the network.
  void PollOnce() { Poll(/*remote=*/true); }
  // Ends the thread after the poll in progress. Blocks; idempotent.
  void Stop();

 private:
  void Loop();
  // Looks at every followed directory, and at every followed source when `remote`.
  void Poll(bool remote);
  // Ends followed job `job`, whose source the allow-lists refuse now (`reason`: their
  // PERMISSION_DENIED, never a listing's 403), by cancelling it; logs why.
  void EndRefused(const JobRunner::FollowedJob& job, const absl::Status& reason);
  // Adds `job`'s new whole steps to it.
  absl::Status Follow(const JobRunner::FollowedJob& job);
  // The same for a followed remote source.
  absl::Status FollowSource(const JobRunner::FollowedJob& job);

  JobRunner* runner_;
  storage::MetricsStore* store_;
  const FileGate* server_files_;
  absl::Duration interval_;
  const SourceLister* sources_;
  absl::Duration remote_interval_;  // kRemoteFollowInterval unless a test shortens it
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace anisoscope::server
