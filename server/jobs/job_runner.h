// JobRunner: the job service's core. Its state, the unfinished jobs and their steps, pending
// or leased, is a JobRegistry (job_registry.h: the transitions, each written to the store and
// published to the job's watchers); the runner adds the lock, the lease calls waiting for a
// step, the thread that expires leases and waits, and the I/O done outside the lock.
//
// Jobs live in the JobStore (the source of truth, so a restarted server resumes them), each
// with the probe and the allowed roots its units carry (fixed at submit: JobSubmission).
// Workers (remote processes over WorkerService, or the server's embedded ones over an
// in-process channel: one path) lease one checkpoint at a time:
//   Lease     -> the oldest pending checkpoint becomes running under a new lease id;
//   Heartbeat -> extends the lease, publishes per-batch progress, tells of a cancel, or ends
//                the lease when the step is stored already or duplicates an earlier one;
//   Complete  -> checks the upload and stores the step with the checkpoint's end in one
//                transaction (step_completion.h), then tells the step's observers;
//   Fail      -> the step fails, or goes back to pending (retryable, given back).
// A lease with no heartbeat for `lease_timeout` expires: the step goes back to pending with
// its attempt counted, and fails with the last error after `max_attempts`. Calls naming a
// lease that is no longer current get FAILED_PRECONDITION and change nothing. Leases are
// stored with the checkpoints: after a restart, embedded workers' leases go back to pending
// and remote workers' leases get one `lease_timeout` to check in.
//
// The lock's rules:
// - `mu_` guards the registry and the waits. It is never held while a callback (a lease
//   answer, an observer) runs, nor while the store answers a lease call: a grant is written
//   after the lock is released (its lease marked `storing` meanwhile, so that nothing else
//   ends it), and so are a heartbeat's look-ups and a completion's upload and its observers.
//   Nothing under it opens a file (a job's roots are fixed at submit).
// - The store is written under the lock where the order of the writes must be the order of
//   the changes: a cancel, a lease's end, a job's end, a followed job's new steps.
// - Events go to watchers under the lock (JobEvents never blocks), so watchers see the
//   store's order.
// Thread-safe; nothing here waits for extraction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/jobs/job_events.h"
#include "server/jobs/job_registry.h"
#include "server/jobs/step_completion.h"
#include "server/jobs/step_observer.h"
#include "storage/job_store.h"

namespace anisoscope::server {

class JobRunner final : private JobNotices {
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
    // Compute dtype sent with every unit (--dtype).
    std::string dtype = "float32";
    // Told of each step stored whole (step_observer.h), in this order; not owned; each must
    // outlive the runner.
    std::vector<StepObserver*> observers;
  };

  // What a job's units carry besides its checkpoints, fixed at submit.
  using JobInputs = JobRegistry::JobInputs;
  // An unfinished job of the store, to run again (job_submission.h LoadUnfinishedJobs).
  struct ResumedJob {
    storage::JobRecord record;
    JobInputs inputs;
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

  // `store` is not owned and must outlive the runner. Queues `resumed` (their leases held by
  // embedded workers go back to pending) and starts the thread that expires leases and long
  // polls.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(const Options& options,
                                                           storage::JobStore* store,
                                                           std::vector<ResumedJob> resumed = {});
  ~JobRunner();  // Drains.

  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // ---- Jobs ----
  // Stores a new job (paths already resolved through its namespace's gate, checkpoints
  // ascending) with `inputs` and queues it; `actor` (who submits) goes to the audit log.
  // UNAVAILABLE while draining.
  absl::StatusOr<storage::JobRecord> Submit(const storage::JobSpec& spec, JobInputs inputs,
                                            const std::string& actor);
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

  // ---- Leases (WorkerService) ----
  // Answers `done` with the oldest pending checkpoint of caller.scope as a unit leased to
  // caller.identity (request.worker names the process), waiting up to request.wait_ms
  // (capped) for one; `done` runs on this thread or on another caller's or the runner's,
  // never under its lock. caller.local: an embedded worker (its lease expires as any other,
  // and goes back at restart).
  // UNAVAILABLE while draining or when the lease cannot be stored; RESOURCE_EXHAUSTED, naming
  // --max-leases-per-worker, when a remote identity already holds and waits for that many.
  // `ticket` (from NewLeaseTicket) names the wait for WithdrawLease.
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
  // stored); UNAVAILABLE when the store cannot write now (the lease stays: retry). A stored
  // step is audited as `identity`'s.
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
  using FollowedJob = JobRegistry::FollowedJob;
  // Active jobs that follow a directory and have not reached their until_step.
  std::vector<FollowedJob> FollowedJobs() const;
  // Appends `found` (steps the job does not have yet; others are dropped) as pending and
  // offers them to workers; FAILED_PRECONDITION when the job is no longer followed
  // (finished, cancelled, draining). A job whose until_step is reached finishes once its
  // steps have.
  absl::Status AddFollowedCheckpoints(int64_t id, std::vector<storage::CheckpointSpec> found);

  // ---- Embedded worker processes ----
  // Tells `listener`, outside the lock, the names of the embedded workers whose lease a
  // cancel has just ended: their processes are stopped at once, since a step stuck in a
  // reader never polls for the cancel. Set once, before any worker starts.
  using CancelListener = std::function<void(const std::set<std::string>& workers)>;
  void SetLocalCancelListener(CancelListener listener);
  // Fails the idle leases embedded worker `worker` holds with `error` (its process died or
  // was stopped mid-step): the step fails, the job goes on.
  void FailLocalLeases(const std::string& worker, const std::string& error);

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
  struct Waiter;
  // Callbacks to run once the lock is released.
  using Deliveries = std::vector<std::function<void()>>;

  JobRunner(const Options& options, storage::JobStore* store);

  // Queues the jobs of a restart; the embedded workers' leases go back to pending.
  absl::Status Resume(std::vector<ResumedJob> resumed);
  // JobNotices: a KIND_ALARM event to the job's watchers.
  void PublishAlarm(int64_t id, const ::anisoscope::v1::Alarm& alarm) override;
  // Appends to the audit log; a failure is logged, never returned (the action happened).
  void Audit(const storage::AuditEntry& entry);
  // Remote lease calls of `identity` waiting now.
  int WaitingOf(const std::string& identity) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves the oldest pending step of the waiter's scope (nullopt: none); FinishGrant
  // stores it. A step whose stored remote descriptor is damaged is failed on the way
  // (JobRegistry::FailIfDamaged), never sent.
  std::optional<JobRegistry::Grant> ReserveLocked(const Waiter& waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `grant` outside the lock, then makes its lease current (the unit), or answers
  // UNAVAILABLE when the store refuses, or no unit when its job was cancelled meanwhile.
  absl::StatusOr<::anisoscope::v1::LeaseWorkResponse> FinishGrant(JobRegistry::Grant grant)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Hands pending steps to waiting lease calls.
  void DispatchLocked(Deliveries* deliveries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expires leases and long polls whose time is up, until Drain.
  void ReaperLoop();

  const Options options_;
  storage::JobStore* const store_;
  JobEvents events_;
  std::thread reaper_;

  mutable absl::Mutex mu_;
  bool leasing_stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  JobRegistry registry_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<Waiter>> waiters_ ABSL_GUARDED_BY(mu_);  // by ticket
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  // The reaper's next wake-up, and whether something due earlier was added since.
  absl::Time next_wake_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool reaper_wake_ ABSL_GUARDED_BY(mu_) = false;
  CancelListener cancel_listener_ ABSL_GUARDED_BY(mu_);

  absl::Mutex join_mu_;  // serializes Drain's join
};

}  // namespace anisoscope::server
