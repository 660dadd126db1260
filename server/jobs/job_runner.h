// JobRunner: the job queue and the lease table that hands checkpoints to workers.
//
// Jobs live in the MetricsStore (the source of truth, so a restarted server resumes
// them); the runner keeps the unfinished ones in memory with their pending checkpoints
// queued first-in first-out by job, ascending by step. Workers (remote processes over
// WorkerService, or the server's embedded ones over an in-process channel: one path)
// lease one checkpoint at a time:
//   Lease     -> the oldest pending checkpoint becomes running under a new lease id;
//   Heartbeat -> extends the lease, publishes per-batch progress, tells of a cancel;
//   Complete  -> checks the upload against the model shape and stores the step and the
//                checkpoint's end in one transaction;
//   Fail      -> the step fails, or goes back to pending (retryable, given back).
// A lease with no heartbeat for `lease_timeout` expires: the step goes back to pending
// with its attempt counted, and fails with the last error after `max_attempts`. Calls
// naming a lease that is no longer current get FAILED_PRECONDITION and change nothing.
// Leases are stored with the checkpoints: after a restart, embedded workers' leases go
// back to pending and remote workers' leases get one `lease_timeout` to check in.
//
// Thread-safe; nothing here waits for extraction. Store I/O happens under the lock except
// a step's write in Complete. Every state change is written to the store and published to
// the job's watchers under one lock, so watchers see the store's order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/file_gate.h"
#include "server/jobs/job_events.h"
#include "server/monitoring/service_metrics.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class JobRunner {
 public:
  struct Options {
    // A lease with no heartbeat for this long expires (--lease-timeout).
    absl::Duration lease_timeout = absl::Seconds(60);
    // Leases of one step that may end without a result before it fails (--max-attempts).
    int max_attempts = 3;
    // The longest long poll a LeaseWork may ask for.
    absl::Duration max_lease_wait = absl::Seconds(60);
    // Leases one remote worker identity (a token, a client certificate) may hold and long
    // polls it may have waiting, together (--max-leases-per-worker); embedded workers are
    // not counted.
    int max_leases_per_worker = 16;
    // Token ids a job's probe may hold, read as far as this and no further, and checked at
    // submit and resume with the unit's size (--max-probe-tokens; server/jobs/probe_bounds.h).
    int64_t max_probe_tokens = 128 * 2048;
    // Compute dtype sent with every unit (--dtype).
    std::string dtype = "float32";
    // Counts each stored checkpoint (family, device, seconds); not owned; may be null.
    ServiceMetrics* metrics = nullptr;
    // The gate a namespace's files are opened through: the token probe's at submit and
    // resume, and its roots are sent with each unit (none: the worker refuses the unit).
    // Called at each of those, at a lease under the runner's lock. Unset: nothing is opened.
    std::function<FileGate(const std::string& ns)> namespace_files;
    // Called with each step stored whole (not skipped), outside the runner's lock, before its
    // STEP_FINISHED event and its worker's answer: the alarm rules (server/alarms/). May be
    // unset.
    std::function<void(int64_t job_id, const storage::StepResult& step)> step_stored;
  };

  // Who calls the worker service, from its Principal: a lease is bound to `identity` (only it
  // may heartbeat, complete or fail it), a remote identity holds at most
  // max_leases_per_worker leases and waits, and only units of namespace `scope`
  // (storage::kAnyNamespace: any) are granted to it.
  struct LeaseCaller {
    std::string identity;
    std::string scope = storage::kAnyNamespace;
    bool local = false;  // one of the embedded workers: no cap; released at restart
  };

  // Answer to a lease request: a unit, no unit (the wait ran out), or an error.
  using LeaseCallback = std::function<void(absl::StatusOr<::anisoscope::v1::LeaseWorkResponse>)>;

  // `store` is not owned and must outlive the runner. Re-queues the store's unfinished jobs
  // and starts the thread that expires leases and long polls.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(const Options& options,
                                                           storage::MetricsStore* store);
  ~JobRunner();  // Drains.

  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // ---- Jobs ----
  // Stores a new job (paths already resolved and checkpoints ascending) and queues it.
  // UNAVAILABLE while draining.
  // `actor` (who submits) goes to the audit log.
  absl::StatusOr<storage::JobRecord> Submit(const storage::JobSpec& spec, const std::string& actor);
  // Cancels a job: its pending and leased checkpoints become cancelled (a leased one's
  // worker hears it at its next heartbeat), the job is cancelled and finishes. A step whose
  // upload is being stored finishes first. NOT_FOUND for an unknown id,
  // FAILED_PRECONDITION for a job already final.
  absl::StatusOr<storage::JobRecord> Cancel(int64_t id, const std::string& actor);
  // NOT_FOUND for an unknown id. Any namespace: the caller checks the job's.
  absl::StatusOr<storage::JobRecord> Get(int64_t id);
  // Namespace `ns`'s jobs, most recent first, at most `limit`; only jobs of `run` unless it
  // is empty.
  absl::StatusOr<std::vector<storage::JobRecord>> List(int limit, const std::string& ns,
                                                       const std::string& run = "");

  // Sends `watcher` the job's snapshot, then its events up to JOB_FINISHED; for a job
  // already final, the snapshot and JOB_FINISHED at once. Calls the watcher on this thread
  // before returning (it must not block). NOT_FOUND for an unknown id (watcher not called).
  absl::Status Watch(int64_t id, JobWatcher* watcher);
  // Stops events to `watcher`; after it returns the watcher is never called again.
  void Unwatch(int64_t id, JobWatcher* watcher);
  // Tells job `id`'s watchers of `alarm` (a KIND_ALARM event); nothing when the job has ended
  // or has no watcher.
  void PublishAlarm(int64_t id, const ::anisoscope::v1::Alarm& alarm);

  // ---- Leases (WorkerService) ----
  // Answers `done` with the oldest pending checkpoint of caller.scope as a unit leased to
  // caller.identity (request.worker names the process), waiting up to request.wait_ms
  // (capped) for one; `done` runs on this thread or on the runner's, never under its lock.
  // caller.local: an embedded worker (its lease expires as any other, and goes back at
  // restart).
  // UNAVAILABLE while draining; RESOURCE_EXHAUSTED, naming --max-leases-per-worker, when a
  // remote identity already holds and waits for that many. `ticket` (from NewLeaseTicket)
  // names the wait for WithdrawLease.
  void Lease(int64_t ticket, const ::anisoscope::v1::LeaseWorkRequest& request,
             const LeaseCaller& caller, LeaseCallback done);
  int64_t NewLeaseTicket();
  // The caller of a waiting Lease went away. True when the wait was withdrawn: `done` is
  // then never called; false when it has been or is being called.
  bool WithdrawLease(int64_t ticket);
  // Heartbeat, Complete and Fail come from `identity` (LeaseCaller::identity):
  // PERMISSION_DENIED, changing nothing, when another identity took the lease.
  absl::StatusOr<::anisoscope::v1::HeartbeatResponse> Heartbeat(
      const ::anisoscope::v1::HeartbeatRequest& request, const std::string& identity);
  // INVALID_ARGUMENT when the upload does not fit the model shape it declares or the unit
  // it was leased with (step_upload.h; the step then fails with that error, nothing
  // stored); the store's error when the write fails (likewise). A stored step is audited as
  // `identity`'s.
  absl::StatusOr<::anisoscope::v1::CompleteWorkResponse> Complete(
      const ::anisoscope::v1::CompleteWorkRequest& request, const std::string& identity);
  absl::Status Fail(const ::anisoscope::v1::FailWorkRequest& request, const std::string& identity);

  // Stops leasing: waiting and later Lease calls get UNAVAILABLE, new jobs are refused.
  // Leases already held stay valid (embedded workers give theirs back as they stop).
  void StopLeasing();
  // StopLeasing, then closes watchers with UNAVAILABLE and stops the runner's thread.
  // Blocks; idempotent.
  void Drain();
  bool draining() const;

  // ---- Following a run being written ----
  struct FollowedJob {
    int64_t id = 0;
    std::string ns;
    std::string dir;                // the followed checkpoints directory
    std::set<int64_t> known_steps;  // already in the job
    std::optional<int64_t> until_step;
  };
  // Active jobs that follow a directory and have not reached their until_step.
  std::vector<FollowedJob> FollowedJobs() const;
  // Appends `found` (steps the job does not have yet; others are dropped) as pending and
  // offers them to workers; FAILED_PRECONDITION when the job is no longer followed
  // (finished, cancelled, draining). A job whose until_step is reached finishes once its
  // steps have.
  absl::Status AddFollowedCheckpoints(int64_t id, std::vector<storage::CheckpointSpec> found);

  // ---- Monitoring ----
  struct Load {
    int64_t queued_steps = 0;   // pending, waiting for a worker
    int64_t active_leases = 0;  // leased to a worker now
    int64_t workers = 0;        // distinct workers holding a lease or waiting for one
  };
  Load CurrentLoad() const;

  // Watchers subscribed to job `id` (for tests).
  int NumWatchers(int64_t id) const { return events_.NumWatchers(id); }

 private:
  struct ActiveJob;
  struct LeaseEntry;
  struct Waiter;
  using StepKey = std::pair<int64_t, size_t>;  // (job id, index into record.checkpoints)
  // Callbacks to run once the lock is released.
  using Deliveries = std::vector<std::function<void()>>;

  JobRunner(const Options& options, storage::MetricsStore* store);

  absl::Status Resume();
  // The gate of namespace `ns` (Options::namespace_files; none set opens nothing).
  FileGate FilesOf(const std::string& ns) const;
  // Appends to the audit log; a failure is logged, never returned (the action happened).
  void Audit(const storage::AuditEntry& entry);
  void AddJob(storage::JobRecord record, ::anisoscope::v1::UnitProbe probe)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The oldest pending step of a job in namespace `scope` (kAnyNamespace: any); nullopt when
  // there is none.
  std::optional<StepKey> FirstPendingLocked(const std::string& scope) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED when remote `identity` holds and waits for max_leases_per_worker.
  absl::Status CheckLeaseCapLocked(const std::string& identity) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Leases the oldest pending step to `waiter`; false when none is pending. When the lease
  // cannot be stored, nothing changes and the store's error comes back.
  absl::StatusOr<bool> GrantLocked(const Waiter& waiter,
                                   ::anisoscope::v1::LeaseWorkResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands pending steps to waiting lease calls.
  void DispatchLocked(Deliveries* deliveries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lease named by a call of `identity`; FAILED_PRECONDITION when it is not current,
  // PERMISSION_DENIED when another identity holds it. A lease taken before holders were
  // recorded is adopted by the first identity that names it.
  absl::StatusOr<LeaseEntry*> FindLeaseLocked(const std::string& lease_id,
                                              const std::string& identity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a lease: the step takes `state` (pending re-queues it) with `error`; then the job
  // finishes if that was its last step, unless `finish_job` is false (the caller will).
  void EndLeaseLocked(const std::string& lease_id, storage::StepState state,
                      const std::string& error, Deliveries* deliveries, bool finish_job = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a lease that did not deliver (expired or retryable): pending again, or failed once
  // the step has had max_attempts.
  void RetryOrFailLocked(const std::string& lease_id, const std::string& error,
                         Deliveries* deliveries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expires leases and long polls whose time is up, until Drain.
  void ReaperLoop();

  // Stores a checkpoint's state; errors are logged and returned.
  absl::Status SaveCheckpoint(ActiveJob* job, size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SaveJobState(ActiveJob* job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishStep(ActiveJob* job, size_t index, int kind, int done, int total)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the job when no checkpoint is pending or running (never while draining).
  void MaybeFinish(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  storage::MetricsStore* const store_;
  JobEvents events_;
  std::thread reaper_;

  mutable absl::Mutex mu_;
  bool leasing_stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::set<StepKey> pending_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<ActiveJob>> active_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<LeaseEntry>> leases_ ABSL_GUARDED_BY(mu_);
  // Leases ended by a cancel, so that their heartbeat can say so (bounded, oldest dropped).
  std::set<std::string> cancelled_leases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> cancelled_order_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<Waiter>> waiters_ ABSL_GUARDED_BY(mu_);  // by ticket
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  // The reaper's next wake-up, and whether something due earlier was added since.
  absl::Time next_wake_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool reaper_wake_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex join_mu_;  // serializes Drain's join
};

}  // namespace anisoscope::server
