// JobRunner: the job queue and the worker pool that turns checkpoints into stored metrics.
//
// Jobs live in the MetricsStore (the source of truth, so a restarted server resumes
// them); the runner keeps the unfinished ones in memory, queues their pending
// checkpoints, and runs them on `workers` threads, each owning one Extractor. For each
// checkpoint: mark running, BuildProbe, skip when already stored (unless force), Extract,
// WriteStep, mark done. A failing checkpoint fails alone; the job then ends failed.
//
// Thread-safe. Submit/Cancel/Get/List/Watch do short store I/O but never wait for
// extraction; Drain blocks until the workers have stopped. Every state change is written
// to the store and published to the job's watchers under one lock, so watchers see the
// store's order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "analysis/extractor.h"
#include "server/job_events.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

// Makes one extractor; called once per worker when the runner is created.
using ExtractorFactory = std::function<absl::StatusOr<std::unique_ptr<analysis::Extractor>>()>;

class JobRunner {
 public:
  struct Options {
    // Worker threads, each with its own extractor (Extract is not reentrant).
    int workers = 1;
    // Makes the workers' extractors; required.
    ExtractorFactory extractor_factory;
  };

  // `store` is not owned and must outlive the runner. Makes the extractors, re-queues the
  // store's unfinished jobs (their running checkpoints become pending), starts the workers.
  // INVALID_ARGUMENT for bad options; the factory's error when an extractor fails.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(const Options& options,
                                                           storage::MetricsStore* store);
  ~JobRunner();  // Drains.

  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Stores a new job (paths already resolved and checkpoints ascending) and queues it.
  // UNAVAILABLE while draining.
  absl::StatusOr<storage::JobRecord> Submit(const storage::JobSpec& spec);
  // Cancels a job: pending checkpoints become cancelled, the running ones are interrupted,
  // the job is cancelled at once (JOB_FINISHED follows when its running steps stop).
  // NOT_FOUND for an unknown id, FAILED_PRECONDITION for a job already final.
  absl::StatusOr<storage::JobRecord> Cancel(int64_t id);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<storage::JobRecord> Get(int64_t id);
  // Most recent first, at most `limit`; only jobs of `run` unless it is empty (filtered
  // here: the store lists every job).
  absl::StatusOr<std::vector<storage::JobRecord>> List(int limit, const std::string& run = "");

  // Sends `watcher` the job's snapshot, then its events up to JOB_FINISHED; for a job
  // already final, the snapshot and JOB_FINISHED at once. Calls the watcher on this thread
  // before returning (it must not block). NOT_FOUND for an unknown id (watcher not called).
  absl::Status Watch(int64_t id, JobWatcher* watcher);
  // Stops events to `watcher`; after it returns the watcher is never called again.
  void Unwatch(int64_t id, JobWatcher* watcher);

  // Refuses new jobs, interrupts running extractions (their checkpoints go back to pending
  // for the next start), lets writes in progress finish, closes watchers with UNAVAILABLE
  // and joins the workers. Blocks; idempotent.
  void Drain();
  bool draining() const;

  // Watchers subscribed to job `id` (for tests).
  int NumWatchers(int64_t id) const { return events_.NumWatchers(id); }

 private:
  struct ActiveJob;
  struct WorkItem {
    int64_t job_id = 0;
    size_t index = 0;  // into record.checkpoints
  };
  struct StepOutcome;

  explicit JobRunner(storage::MetricsStore* store);

  absl::Status Resume();
  void AddJob(storage::JobRecord record, analysis::ProbeSpec probe)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop(analysis::Extractor* extractor);
  StepOutcome RunStep(analysis::Extractor* extractor, ActiveJob* job, size_t index);
  void SaveCheckpoint(ActiveJob* job, size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SaveJobState(ActiveJob* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishStep(ActiveJob* job, size_t index, int kind, int done, int total)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the job when no checkpoint is pending or running (never while draining).
  void MaybeFinish(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::MetricsStore* const store_;
  std::vector<std::unique_ptr<analysis::Extractor>> extractors_;
  std::vector<std::thread> threads_;
  JobEvents events_;

  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<WorkItem> queue_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<ActiveJob>> active_ ABSL_GUARDED_BY(mu_);

  absl::Mutex join_mu_;  // serializes Drain's join
};

}  // namespace anisoscope::server
