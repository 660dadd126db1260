// LeaseKeeper: keeps one unit's lease alive while the engine works on it.
//
// A thread sends a heartbeat every heartbeat interval, and at once when the engine
// finishes a batch (or a remote step's download reports progress), so the server publishes
// per-batch progress. The lease
// has ended when the server says the job was cancelled, the step is already stored or
// (dedupe) its weights are an earlier stored step's, or that the lease is no longer current; the
// engine polls ended() between batches. While the server is unreachable, heartbeats are retried (a
// restarted server honours the lease). Thread-safe.
#pragma once

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "worker/work_client.h"

namespace anisoscope::worker {

class LeaseKeeper {
 public:
  // Starts heartbeating `unit`'s lease; `client` is not owned and outlives the keeper.
  LeaseKeeper(WorkClient* client, const ::anisoscope::v1::WorkUnit& unit);
  ~LeaseKeeper();  // Stops heartbeating and joins.

  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Tells the server the probe's id at once (it may skip a stored step); false when the
  // lease has ended.
  bool ReportProbe(const std::string& probe_id);
  // Tells the server the weight files' fingerprint at once (with the job's dedupe it may
  // skip the step); false when the lease has ended.
  bool ReportFingerprint(const std::string& fingerprint);
  // Wakes the heartbeat thread to send the progress (the engine never waits for it;
  // batches done faster than a round trip go out together).
  void SetProgress(int done, int total);
  // Likewise for a remote step's download: sent in each heartbeat until ClearFetch().
  void SetFetch(const ::anisoscope::v1::FetchProgress& fetch);
  void ClearFetch();
  // Waits for the heartbeat in flight and sends the progress not yet sent, so that the
  // server has the last batch's progress before the upload.
  void FlushProgress();
  // True once the server ended the lease; `why` says how (for logs).
  bool ended() const;
  std::string why() const;

 private:
  // Sets `field` (probe_id_ or fingerprint_) under mu_ and sends a heartbeat at once.
  bool Report(std::string* field, const std::string& value);
  void Loop();
  // Sends one heartbeat with the current progress and takes in the verdict.
  void Beat();
  void BeatLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_);

  WorkClient* const client_;
  const std::string lease_id_;
  const absl::Duration interval_;

  mutable absl::Mutex mu_;
  std::string probe_id_ ABSL_GUARDED_BY(mu_);
  std::string fingerprint_ ABSL_GUARDED_BY(mu_);
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  bool progress_unsent_ ABSL_GUARDED_BY(mu_) = false;
  bool fetching_ ABSL_GUARDED_BY(mu_) = false;
  ::anisoscope::v1::FetchProgress fetch_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::string why_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex beat_mu_;  // one heartbeat in flight at a time
  std::thread thread_;
};

}  // namespace anisoscope::worker
