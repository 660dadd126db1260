// JobRegistry: the unfinished jobs in memory and the state of each of their steps: pending
// (queued first-in first-out by job, ascending by step), leased (a LeaseTable) or ended; and
// the transitions of the lease protocol, each written to the store and then published to the
// job's watchers, so that watchers see the store's order. A job leaves the registry once its
// final state is stored.
//
// When to take a transition, the waits, the threads and the I/O done outside the lock are
// JobRunner's. A plain class: no lock, no thread, no file I/O. Not thread-safe: the runner
// calls it under its lock. Calls that change a state block on the store's write.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/jobs/job_events.h"
#include "server/jobs/lease_table.h"
#include "server/jobs/step_completion.h"
#include "storage/job_store.h"
#include "storage/types.h"

namespace anisoscope::server {

class JobRegistry {
 public:
  struct Options {
    int max_attempts = 3;           // leases of a step that may end without a result
    int max_leases_per_worker = 16;  // LeaseTable's cap
    absl::Duration lease_timeout = absl::Seconds(60);
    std::string dtype = "float32";  // sent with every unit
  };

  // What a job's units carry besides its checkpoints, fixed at submit.
  struct JobInputs {
    ::anisoscope::v1::UnitProbe probe;
    std::vector<std::string> roots;  // the namespace's allowed roots (none: units refused)
  };

  struct ActiveJob {
    storage::JobRecord record;
    // Sent with every unit of the job; shared with a completion's check of an upload.
    std::shared_ptr<const ::anisoscope::v1::UnitProbe> probe;
    std::vector<std::string> roots;  // sent with every unit
    bool cancel_requested = false;
    bool start_storing = false;  // a grant is storing the job's change from queued to running
  };

  // A step reserved for a lease call, to be stored outside the lock (then GrantStored).
  struct Grant {
    std::string lease_id;
    StepKey key;
    storage::JobCheckpoint before;      // the step as it was, should the store refuse
    storage::JobCheckpoint checkpoint;  // the step as leased, to store
    bool starts_job = false;            // the job's first grant: its running state to store
    ::anisoscope::v1::LeaseWorkResponse response;  // the unit, but for its deadline
  };

  // Who a lease is granted to.
  struct Grantee {
    std::string identity;
    bool local = false;
    std::string worker;  // the process's name
    std::string device;  // its device
  };

  // Neither owned; both must outlive the registry.
  JobRegistry(const Options& options, storage::JobStore* store, JobEvents* events)
      : options_(options), store_(store), events_(events),
        leases_(options.max_leases_per_worker) {}

  // ---- Jobs ----
  // Adds `record` (its pending steps queued); finishes it at once when nothing is left.
  void Add(storage::JobRecord record, JobInputs inputs);
  // The active job `id`, or nullptr.
  ActiveJob* Find(int64_t id);
  // Cancels `job`: its state stored, its pending steps and idle leases cancelled (a busy
  // lease is ended by the call storing it); it finishes once no step runs. Returns its record
  // as cancelled.
  storage::JobRecord Cancel(ActiveJob* job);
  // Appends `found`, minus the steps job `id` has, as pending; true when any was added.
  // FAILED_PRECONDITION when the job is not followed (gone, cancelled, draining).
  absl::StatusOr<bool> AddFollowed(int64_t id, std::vector<storage::CheckpointSpec> found);
  struct FollowedJob {
    int64_t id = 0;
    std::string ns;
    std::string dir;                // the followed checkpoints directory (a source: its name)
    std::set<int64_t> known_steps;  // already in the job
    std::optional<int64_t> until_step;
    std::string source;  // a followed remote source (serialized v1.CheckpointSource); else empty
    bool dedupe = false;
  };
  std::vector<FollowedJob> FollowedJobs() const;
  // A KIND_ALARM event to job `id`'s watchers; nothing when it has ended or has none.
  void PublishAlarm(int64_t id, const ::anisoscope::v1::Alarm& alarm);
  // From now on no job finishes (their final state is left for the next start) and no
  // followed step is added (AddFollowed: FAILED_PRECONDITION).
  void StopFinishing() { draining_ = true; }

  // ---- Steps and leases ----
  // The oldest pending step of a job in namespace `scope` (kAnyNamespace: any).
  std::optional<StepKey> FirstPending(const std::string& scope) const;
  bool has_pending() const { return !pending_.empty(); }
  // Pending step `key`, when its stored remote descriptor does not parse, failed on the
  // server ("stored remote descriptor of step N is damaged"; stored, published, its listed
  // duplicates requeued, its job finished when final; `key` may then be gone): true. Else
  // false, nothing changed. Called before Reserve: no unit is sent for such a step.
  bool FailIfDamaged(StepKey key);
  // Reserves pending step `key` for `grantee`: running in memory under a new lease that is
  // `storing` (nothing ends it until GrantStored). The unit carries the job's next pending
  // step as read-ahead unless that would take it past half of kMaxMessageBytes.
  Grant Reserve(StepKey key, const Grantee& grantee);
  // The grant's store write ended: `stored` is the checkpoint's (its updated_at), `started`
  // the job state's when grant.starts_job. On success the lease becomes current and the unit
  // gets its deadline (true); a refused write puts the step back as it was, or cancels it
  // when its job was cancelled meanwhile (false, with nothing leased). `*pending` is set when
  // a step went back to pending.
  absl::StatusOr<bool> GrantStored(Grant& grant, const absl::StatusOr<std::string>& stored,
                                   const absl::StatusOr<std::string>& started, bool* pending);
  // The lease named by a call of `identity` (LeaseTable::FindHeldBy; an adoption is stored).
  // FAILED_PRECONDITION for one still being granted.
  absl::StatusOr<LeaseEntry*> FindLease(const std::string& lease_id, const std::string& identity);
  bool WasCancelled(const std::string& lease_id) const { return leases_.WasCancelled(lease_id); }
  LeaseEntry* LeaseOf(const std::string& lease_id) { return leases_.Find(lease_id); }
  storage::JobCheckpoint& Checkpoint(StepKey key);
  const storage::JobRecord& Record(StepKey key) { return active_.at(key.first)->record; }
  // What `lease`'s heartbeat `request` asks of the store (step_completion.h); nothing when
  // its checks are done or not wanted. Records the probe id it reports.
  VerdictQuestion QuestionFor(LeaseEntry* lease, const ::anisoscope::v1::HeartbeatRequest& request);
  // The heartbeat's answer: `verdict` applied to `lease` (ending it skipped), or its progress
  // and a new deadline (VERDICT_CONTINUE, also while it is being completed).
  ::anisoscope::v1::HeartbeatResponse ApplyVerdict(
      LeaseEntry* lease, const ::anisoscope::v1::HeartbeatRequest& request,
      const Verdict& verdict);
  // VERDICT_CANCELLED: the heartbeat of a lease a cancel ended.
  static ::anisoscope::v1::HeartbeatResponse Cancelled();
  // Ends lease `lease_id` as a worker's FailWork of `kind` says, with `error`: true when the
  // step went back to pending. INVALID_ARGUMENT for no kind.
  absl::StatusOr<bool> EndFailed(const std::string& lease_id,
                                 ::anisoscope::v1::FailWorkRequest::Kind kind,
                                 const std::string& error);
  // The end of a completion of `step`'s lease `lease_id` (no longer `completing`), as
  // StoreCompletion answered: the stored checkpoint, or the step failed for a refused upload
  // (the error, naming the step), or the lease kept for a retry when the store could not write
  // (UNAVAILABLE). FAILED_PRECONDITION when the lease is no longer current.
  absl::Status EndCompletion(const std::string& lease_id, int64_t step,
                             const absl::StatusOr<storage::FinishedLease>& stored);
  // Ends a lease: the step takes `state` (pending re-queues it: true) with `error`; a failed
  // step's listed duplicates are re-queued (true: RequeueListedDuplicatesOf); then the job
  // finishes if that was its last step, unless `finish_job` is false.
  bool EndLease(const std::string& lease_id, storage::StepState state, const std::string& error,
                bool finish_job = true);
  // Ends a lease that did not deliver: pending again (true), or failed after max_attempts.
  bool RetryOrFail(const std::string& lease_id, const std::string& error);
  // Expires the idle leases past their deadline; true when a step went back to pending.
  bool ExpireLeases(absl::Time now);
  absl::Status CheckCap(const std::string& identity, int waiting) const {
    return leases_.CheckCap(identity, waiting);
  }
  absl::Time NextLeaseDeadline() const { return leases_.NextDeadline(); }

  // ---- Load ----
  int64_t queued_steps() const { return static_cast<int64_t>(pending_.size()); }
  int64_t active_leases() const { return static_cast<int64_t>(leases_.size()); }
  // The names of the workers holding a lease.
  std::set<std::string> LeaseWorkers() const;
  // The embedded workers (by name) holding an idle lease of job `job_id`: those a cancel ends.
  std::set<std::string> LocalWorkersOf(int64_t job_id) const;
  // The idle leases embedded worker `worker` holds, with their holder identity.
  std::vector<std::pair<std::string, std::string>> LocalLeasesOf(const std::string& worker) const;

 private:
  // The name of the worker process holding `lease`.
  const std::string& WorkerOf(const LeaseEntry& lease) const;
  // A heartbeat's progress (STEP_PROGRESS when it moved) and a new deadline.
  void Extend(LeaseEntry* lease, int batches_done, int batches_total);
  // Ends a lease whose weights are step `earlier`'s (dedupe): skipped.
  void EndDuplicate(const std::string& lease_id, const std::string& fingerprint, int64_t earlier);
  // Stores a checkpoint's state; errors are logged and returned.
  absl::Status SaveCheckpoint(ActiveJob* job, size_t index);
  void SaveJobState(ActiveJob* job);
  void PublishStep(ActiveJob* job, size_t index, int kind, int done, int total);
  // A remote step's download, as its worker's heartbeat reports it: STEP_FETCHING.
  void PublishFetching(const LeaseEntry* lease, const ::anisoscope::v1::FetchProgress& fetch);
  // Ends the job when no checkpoint is pending or running (never while draining).
  void MaybeFinish(int64_t job_id);
  // The job's next pending step after `key` as `unit`'s read-ahead (next_checkpoint_path or
  // next_remote); a next_remote that would take the unit past half of kMaxMessageBytes, or
  // does not parse, is left out.
  void AddReadAhead(const ActiveJob& job, StepKey key, ::anisoscope::v1::WorkUnit* unit) const;
  // Step `step` of `job` failed: its duplicates that the listing's dedupe skipped
  // (duplicate_of == step, ListedDuplicateReason) go back to pending, duplicate_of cleared,
  // stored and published as added; the heartbeat's fingerprint dedupe then skips all but
  // the first of them to be stored. Nothing for a cancelled job. True when any was requeued.
  bool RequeueListedDuplicatesOf(ActiveJob* job, int64_t step);

  const Options options_;
  storage::JobStore* const store_;
  JobEvents* const events_;
  bool draining_ = false;
  std::set<StepKey> pending_;
  std::map<int64_t, std::unique_ptr<ActiveJob>> active_;
  LeaseTable leases_;
};

}  // namespace anisoscope::server
