// JobEvents: the in-memory hub that fans a job's progress events out to its watchers.
//
// Thread-safe. Publish calls each watcher's OnEvent with the hub's lock held, so a
// watcher sees a job's events in publication order; watchers must therefore never block
// and never call back into the hub from OnEvent / OnClosed. Watchers are not owned: a
// watcher unsubscribes before it is destroyed, after which the hub never calls it again.
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::server {

class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  // One event; after KIND_JOB_FINISHED the watcher is dropped by the hub. Must not block.
  virtual void OnEvent(const ::anisoscope::v1::JobEvent& event) = 0;
  // The hub is closing (server shutdown) before the job finished. Must not block.
  virtual void OnClosed(const absl::Status& status) = 0;
};

class JobEvents {
 public:
  JobEvents() = default;
  JobEvents(const JobEvents&) = delete;
  JobEvents& operator=(const JobEvents&) = delete;

  // Adds `watcher` for job `job_id`. After CloseAll, the watcher is closed at once instead.
  void Subscribe(int64_t job_id, JobWatcher* watcher);
  // Removes `watcher`; a no-op when it is not subscribed. Never calls the watcher.
  void Unsubscribe(int64_t job_id, JobWatcher* watcher);
  // Delivers `event` to the job's watchers; KIND_JOB_FINISHED also unsubscribes them.
  void Publish(int64_t job_id, const ::anisoscope::v1::JobEvent& event);
  // Closes every watcher with `status` and refuses later subscriptions the same way.
  void CloseAll(const absl::Status& status);

  // Watchers subscribed to `job_id` (for tests).
  int NumWatchers(int64_t job_id) const;

 private:
  mutable absl::Mutex mu_;
  std::map<int64_t, std::set<JobWatcher*>> watchers_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anisoscope::server
