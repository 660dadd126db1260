#include "server/jobs/job_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/checkpoint/fingerprint.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "proto/final_states.h"
#include "server/jobs/step_upload.h"
#include "server/jobs/unit_probe.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {
namespace {

using storage::JobState;
using storage::StepState;

constexpr size_t kCancelledLeasesKept = 4096;
// The longest error text of a worker's FailWork kept with the step.
constexpr size_t kMaxWorkerErrorBytes = 4096;

bool IsFinal(JobState state) { return pb::IsFinal(ToProto(state)); }

absl::Status LeaseNotCurrent(const std::string& lease_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "lease '", lease_id, "' is not current (it expired, was completed or given back)"));
}

// True while `record` watches its directory: it follows one and no step at or past its
// until_step has been added yet.
bool StillFollowing(const storage::JobRecord& record) {
  if (record.spec.follow_dir.empty()) return false;
  if (!record.spec.until_step.has_value()) return true;
  for (const storage::JobCheckpoint& checkpoint : record.checkpoints) {
    if (checkpoint.step >= *record.spec.until_step) return false;
  }
  return true;
}

// Logs that job `job_id`'s `checkpoint` has the weights of an earlier step (duplicate_of).
void WarnDuplicate(int64_t job_id, const storage::JobCheckpoint& checkpoint) {
  spdlog::warn("job {} step {} has the same weights as step {} ({}){}", job_id, checkpoint.step,
               checkpoint.duplicate_of, checkpoint.fingerprint,
               checkpoint.state == StepState::kSkipped ? ": not stored (dedupe)" : "");
}

}  // namespace

struct JobRunner::ActiveJob {
  storage::JobRecord record;
  // Sent with every unit of the job; shared with Complete's check of an upload.
  std::shared_ptr<const pb::UnitProbe> probe;
  bool cancel_requested = false;
};

struct JobRunner::LeaseEntry {
  StepKey key;
  std::string holder;  // the identity that took it; "" until adopted (taken before holders)
  bool local = false;
  bool completing = false;           // Complete is storing the upload: the lease cannot end now
  bool stored_checked = false;       // the probe's heartbeat was checked (HasStep)
  bool fingerprint_checked = false;  // the fingerprint's heartbeat was checked (dedupe)
  std::string device;                // the worker's, from its lease request
  absl::Time deadline = absl::InfiniteFuture();
  int batches_done = 0;
};

struct JobRunner::Waiter {
  pb::LeaseWorkRequest request;
  LeaseCaller caller;
  absl::Time deadline;
  LeaseCallback done;
};

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(const Options& options,
                                                             storage::MetricsStore* store) {
  if (store == nullptr) return absl::InvalidArgumentError("a metrics store is required");
  if (options.lease_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the lease timeout must be positive");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max attempts must be >= 1, got ", options.max_attempts));
  }
  if (options.max_leases_per_worker < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max leases per worker must be >= 1, got ", options.max_leases_per_worker));
  }
  std::unique_ptr<JobRunner> runner(new JobRunner(options, store));
  RETURN_IF_ERROR(runner->Resume());
  runner->reaper_ = std::thread(&JobRunner::ReaperLoop, runner.get());
  return runner;
}

JobRunner::JobRunner(const Options& options, storage::MetricsStore* store)
    : options_(options), store_(store) {}

JobRunner::~JobRunner() { Drain(); }

// ---- Jobs ------------------------------------------------------------------------------

FileGate JobRunner::FilesOf(const std::string& ns) const {
  return options_.namespace_files ? options_.namespace_files(ns) : *FileGate::Beneath({});
}

absl::Status JobRunner::Resume() {
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids, store_->UnfinishedJobs());
  absl::MutexLock lock(&mu_);
  const absl::Time grace = absl::Now() + options_.lease_timeout;
  for (int64_t id : ids) {
    ASSIGN_OR_RETURN(storage::JobRecord record, store_->GetJob(id));
    absl::StatusOr<pb::UnitProbe> probe =
        UnitProbeFromSpec(record.spec, FilesOf(record.spec.ns), options_.max_probe_tokens);
    if (!probe.ok()) {
      spdlog::error("job {} cannot resume: {}", id, probe.status().ToString());
      RETURN_IF_ERROR(
          store_->SetJobState(id, JobState::kFailed, std::string(probe.status().message()))
              .status());
      continue;
    }
    int left = 0;
    for (size_t i = 0; i < record.checkpoints.size(); ++i) {
      storage::JobCheckpoint& checkpoint = record.checkpoints[i];
      if (checkpoint.state != StepState::kRunning) {
        if (checkpoint.state == StepState::kPending) ++left;
        continue;
      }
      if (checkpoint.lease_local || checkpoint.lease_id.empty()) {
        // The embedded worker died with the server: not the step's fault.
        checkpoint.state = StepState::kPending;
        checkpoint.attempt = std::max(0, checkpoint.attempt - 1);
        checkpoint.lease_id.clear();
        checkpoint.lease_local = false;
        checkpoint.lease_holder.clear();
        ASSIGN_OR_RETURN(record.updated_at, store_->UpdateCheckpoint(id, checkpoint));
        ++left;
        continue;
      }
      auto entry = std::make_unique<LeaseEntry>();
      entry->key = {id, i};
      entry->holder = checkpoint.lease_holder;
      entry->deadline = grace;
      leases_[checkpoint.lease_id] = std::move(entry);
      ++left;
    }
    spdlog::info("resuming job {} (run {}): {} of {} checkpoints left", id, record.spec.run, left,
                 record.checkpoints.size());
    AddJob(std::move(record), std::move(probe).value());
  }
  return absl::OkStatus();
}

void JobRunner::AddJob(storage::JobRecord record, pb::UnitProbe probe) {
  const int64_t id = record.id;
  auto job = std::make_unique<ActiveJob>();
  job->record = std::move(record);
  job->probe = std::make_shared<const pb::UnitProbe>(std::move(probe));
  for (size_t i = 0; i < job->record.checkpoints.size(); ++i) {
    if (job->record.checkpoints[i].state == StepState::kPending) pending_.insert({id, i});
  }
  active_[id] = std::move(job);
  MaybeFinish(id);
}

absl::StatusOr<storage::JobRecord> JobRunner::Submit(const storage::JobSpec& spec,
                                                     const std::string& actor) {
  if (draining()) return absl::UnavailableError("server is shutting down; not accepting jobs");
  if (spec.checkpoints.empty() && spec.follow_dir.empty()) {
    return absl::InvalidArgumentError("the job has no checkpoints");
  }
  ASSIGN_OR_RETURN(pb::UnitProbe probe,
                   UnitProbeFromSpec(spec, FilesOf(spec.ns), options_.max_probe_tokens));
  ASSIGN_OR_RETURN(const int64_t id, store_->CreateJob(spec));
  ASSIGN_OR_RETURN(storage::JobRecord record, store_->GetJob(id));
  spdlog::info("job {} submitted by {}: run {}/{}, {} checkpoints{}{}", id, actor, spec.ns,
               spec.run, spec.checkpoints.size(), spec.force ? ", force" : "",
               spec.follow_dir.empty() ? "" : absl::StrCat(", following ", spec.follow_dir));
  Audit({0, "", actor, spec.ns, "submit", absl::StrCat("job ", id),
         absl::StrCat("run ", spec.run, ", ", spec.checkpoints.size(), " checkpoints",
                      spec.force ? ", force" : "")});
  Deliveries deliveries;
  {
    absl::MutexLock lock(&mu_);
    AddJob(record, std::move(probe));
    DispatchLocked(&deliveries);
  }
  for (auto& deliver : deliveries) deliver();
  return record;
}

absl::StatusOr<storage::JobRecord> JobRunner::Cancel(int64_t id, const std::string& actor) {
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it != active_.end() && !it->second->cancel_requested) {
      ActiveJob* job = it->second.get();
      job->cancel_requested = true;
      job->record.state = JobState::kCancelled;
      job->record.error.clear();
      SaveJobState(job);
      for (auto p = pending_.begin(); p != pending_.end();) {
        if (p->first != id) {
          ++p;
          continue;
        }
        const size_t index = p->second;
        p = pending_.erase(p);
        job->record.checkpoints[index].state = StepState::kCancelled;
        SaveCheckpoint(job, index).IgnoreError();  // logged
        PublishStep(job, index, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
      }
      std::vector<std::string> leased;
      for (const auto& [lease_id, lease] : leases_) {
        if (lease->key.first == id && !lease->completing) leased.push_back(lease_id);
      }
      Deliveries none;
      for (const std::string& lease_id : leased) {
        EndLeaseLocked(lease_id, StepState::kCancelled, "", &none, /*finish_job=*/false);
        cancelled_leases_.insert(lease_id);
        cancelled_order_.push_back(lease_id);
      }
      if (cancelled_order_.size() > kCancelledLeasesKept) {
        const size_t drop = cancelled_order_.size() - kCancelledLeasesKept;
        for (size_t i = 0; i < drop; ++i) cancelled_leases_.erase(cancelled_order_[i]);
        cancelled_order_.erase(cancelled_order_.begin(), cancelled_order_.begin() + drop);
      }
      spdlog::info("job {} cancelled by {}", id, actor);
      Audit({0, "", actor, job->record.spec.ns, "cancel", absl::StrCat("job ", id),
             absl::StrCat("run ", job->record.spec.run)});
      storage::JobRecord copy = job->record;
      MaybeFinish(id);
      return copy;
    }
  }
  ASSIGN_OR_RETURN(const storage::JobRecord record, store_->GetJob(id));
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", id, " has already ", storage::JobStateName(record.state), "; nothing to cancel"));
}

absl::StatusOr<storage::JobRecord> JobRunner::Get(int64_t id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it != active_.end()) return it->second->record;
  }
  return store_->GetJob(id);
}

absl::StatusOr<std::vector<storage::JobRecord>> JobRunner::List(int limit, const std::string& ns,
                                                                const std::string& run) {
  return store_->ListJobs(limit, ns, run);
}

void JobRunner::Audit(const storage::AuditEntry& entry) {
  if (absl::Status status = store_->AppendAudit(entry); !status.ok()) {
    spdlog::error("audit of {} {} by {} not stored: {}", entry.action, entry.target, entry.actor,
                  std::string(status.message()));
  }
}

absl::Status JobRunner::Watch(int64_t id, JobWatcher* watcher) {
  pb::JobEvent snapshot;
  snapshot.set_kind(pb::JobEvent::KIND_SNAPSHOT);
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it != active_.end()) {
      ToProto(it->second->record, snapshot.mutable_job());
      watcher->OnEvent(snapshot);
      events_.Subscribe(id, watcher);
      return absl::OkStatus();
    }
  }
  // Not active: final (jobs leave `active_` only after their final state is stored).
  ASSIGN_OR_RETURN(const storage::JobRecord record, store_->GetJob(id));
  ToProto(record, snapshot.mutable_job());
  watcher->OnEvent(snapshot);
  if (IsFinal(record.state)) {
    pb::JobEvent finished;
    finished.set_kind(pb::JobEvent::KIND_JOB_FINISHED);
    *finished.mutable_job() = snapshot.job();
    watcher->OnEvent(finished);
  } else {
    // Unfinished in the store but not run here (another server on the same database).
    events_.Subscribe(id, watcher);
  }
  return absl::OkStatus();
}

void JobRunner::Unwatch(int64_t id, JobWatcher* watcher) { events_.Unsubscribe(id, watcher); }

void JobRunner::PublishAlarm(int64_t id, const pb::Alarm& alarm) {
  absl::MutexLock lock(&mu_);
  const auto it = active_.find(id);
  if (it == active_.end() || events_.NumWatchers(id) == 0) return;
  pb::JobEvent event;
  event.set_kind(pb::JobEvent::KIND_ALARM);
  ToProto(it->second->record, event.mutable_job());
  *event.mutable_alarm() = alarm;
  events_.Publish(id, event);
}

// ---- Leases ----------------------------------------------------------------------------

int64_t JobRunner::NewLeaseTicket() {
  absl::MutexLock lock(&mu_);
  return next_ticket_++;
}

void JobRunner::Lease(int64_t ticket, const pb::LeaseWorkRequest& request,
                      const LeaseCaller& caller, LeaseCallback done) {
  Waiter waiter;
  waiter.request = request;
  waiter.caller = caller;
  waiter.deadline = absl::Now() + std::min(absl::Milliseconds(std::max(0, request.wait_ms())),
                                           options_.max_lease_wait);
  pb::LeaseWorkResponse response;
  bool stopped = false;
  absl::StatusOr<bool> granted = false;
  {
    absl::MutexLock lock(&mu_);
    stopped = leasing_stopped_;
    if (!stopped && !caller.local) {
      if (absl::Status capped = CheckLeaseCapLocked(caller.identity); !capped.ok()) {
        granted = capped;
      }
    }
    if (!stopped && granted.ok()) {
      granted = GrantLocked(waiter, &response);
      if (granted.ok() && !*granted && waiter.deadline > absl::Now()) {
        if (waiter.deadline < next_wake_) reaper_wake_ = true;
        waiter.done = std::move(done);
        waiters_[ticket] = std::make_unique<Waiter>(std::move(waiter));
        return;
      }
    }
  }
  if (stopped) {
    done(absl::UnavailableError("server is shutting down; not leasing work"));
  } else if (!granted.ok()) {
    done(granted.status());
  } else {
    done(std::move(response));
  }
}

bool JobRunner::WithdrawLease(int64_t ticket) {
  absl::MutexLock lock(&mu_);
  return waiters_.erase(ticket) > 0;
}

absl::Status JobRunner::CheckLeaseCapLocked(const std::string& identity) const {
  int held = 0;
  for (const auto& [id, lease] : leases_) held += !lease->local && lease->holder == identity;
  int waiting = 0;
  for (const auto& [ticket, waiter] : waiters_) {
    waiting += !waiter->caller.local && waiter->caller.identity == identity;
  }
  if (held + waiting < options_.max_leases_per_worker) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("worker identity '", identity, "' holds ", held, " leases and waits for ",
                   waiting, ", the most --max-leases-per-worker (", options_.max_leases_per_worker,
                   ") allows; complete or give one back first"));
}

std::optional<JobRunner::StepKey> JobRunner::FirstPendingLocked(const std::string& scope) const {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (scope == storage::kAnyNamespace || active_.at(it->first)->record.spec.ns == scope) {
      return *it;
    }
    it = pending_.lower_bound({it->first + 1, 0});  // the next job's first pending step
  }
  return std::nullopt;
}

absl::StatusOr<bool> JobRunner::GrantLocked(const Waiter& waiter, pb::LeaseWorkResponse* response) {
  const std::optional<StepKey> first = FirstPendingLocked(waiter.caller.scope);
  if (!first.has_value()) return false;
  const StepKey key = *first;
  ActiveJob* job = active_.at(key.first).get();
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[key.second];
  const storage::JobCheckpoint before = checkpoint;
  const std::string lease_id = RandomId128();
  checkpoint.state = StepState::kRunning;
  checkpoint.error.clear();
  checkpoint.probe_id.clear();  // the lease's heartbeat reports it
  checkpoint.attempt += 1;
  checkpoint.lease_id = lease_id;
  checkpoint.lease_local = waiter.caller.local;
  checkpoint.lease_holder = waiter.caller.identity;
  checkpoint.worker = waiter.request.worker().name();
  if (absl::Status saved = SaveCheckpoint(job, key.second); !saved.ok()) {
    checkpoint = before;  // the lease exists only once it is stored
    return absl::UnavailableError(
        absl::StrCat("cannot store a lease (retry later): ", saved.message()));
  }
  pending_.erase(key);
  if (job->record.state == JobState::kQueued) {
    job->record.state = JobState::kRunning;
    SaveJobState(job);
  }

  auto entry = std::make_unique<LeaseEntry>();
  entry->key = key;
  entry->holder = waiter.caller.identity;
  entry->local = waiter.caller.local;
  entry->device = waiter.request.worker().device();
  // Embedded workers heartbeat too: a unit of theirs that cannot complete (a result too big
  // to send) expires like any other rather than stay running.
  entry->deadline = absl::Now() + options_.lease_timeout;
  if (entry->deadline < next_wake_) reaper_wake_ = true;
  pb::WorkUnit* unit = response->mutable_unit();
  unit->set_lease_id(lease_id);
  unit->set_job_id(key.first);
  unit->set_run(job->record.spec.run);
  unit->set_step(checkpoint.step);
  unit->set_checkpoint_path(checkpoint.path);
  *unit->mutable_probe() = *job->probe;
  unit->mutable_options()->set_dtype(options_.dtype);
  unit->set_lease_deadline_unix_ms(absl::ToUnixMillis(entry->deadline));
  unit->set_heartbeat_interval_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(options_.lease_timeout / 4)));
  unit->set_attempt(checkpoint.attempt);
  if (auto next = pending_.lower_bound({key.first, 0});
      next != pending_.end() && next->first == key.first) {
    unit->set_next_checkpoint_path(job->record.checkpoints[next->second].path);
  }
  for (std::string& root : FilesOf(job->record.spec.ns).roots()) {
    unit->add_allowed_roots(std::move(root));
  }
  leases_[lease_id] = std::move(entry);
  spdlog::info("job {} step {} leased to {} ({}attempt {}, lease {})", key.first, checkpoint.step,
               checkpoint.worker, waiter.caller.local ? "embedded, " : "", checkpoint.attempt,
               lease_id);
  PublishStep(job, key.second, pb::JobEvent::KIND_STEP_STARTED, 0, 0);
  return true;
}

void JobRunner::DispatchLocked(Deliveries* deliveries) {
  if (leasing_stopped_) return;
  // Oldest wait first; a wait with nothing pending in its namespace keeps waiting.
  for (auto it = waiters_.begin(); it != waiters_.end() && !pending_.empty();) {
    if (!FirstPendingLocked(it->second->caller.scope).has_value()) {
      ++it;
      continue;
    }
    std::unique_ptr<Waiter> waiter = std::move(it->second);
    it = waiters_.erase(it);
    auto response = std::make_shared<pb::LeaseWorkResponse>();
    const absl::StatusOr<bool> granted = GrantLocked(*waiter, response.get());
    if (!granted.ok()) {
      deliveries->push_back(
          [done = std::move(waiter->done), status = granted.status()] { done(status); });
      return;  // the store refuses writes now; the next call tries again
    }
    deliveries->push_back([done = std::move(waiter->done), response] { done(*response); });
  }
}

absl::StatusOr<JobRunner::LeaseEntry*> JobRunner::FindLeaseLocked(const std::string& lease_id,
                                                                  const std::string& identity) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return LeaseNotCurrent(lease_id);
  LeaseEntry* lease = it->second.get();
  if (lease->holder.empty()) {
    lease->holder = identity;
    ActiveJob* job = active_.at(lease->key.first).get();
    job->record.checkpoints[lease->key.second].lease_holder = identity;
    SaveCheckpoint(job, lease->key.second).IgnoreError();  // logged; kept in memory anyway
  } else if (lease->holder != identity) {
    return absl::PermissionDeniedError(
        absl::StrCat("lease '", lease_id,
                     "' was taken by another worker identity; only the one that leased a unit may "
                     "heartbeat, complete or fail it"));
  }
  return lease;
}

absl::StatusOr<pb::HeartbeatResponse> JobRunner::Heartbeat(const pb::HeartbeatRequest& request,
                                                           const std::string& identity) {
  pb::HeartbeatResponse response;
  absl::MutexLock lock(&mu_);
  if ((cancelled_leases_.count(request.lease_id())) > 0) {
    response.set_verdict(pb::HeartbeatResponse::VERDICT_CANCELLED);
    return response;
  }
  ASSIGN_OR_RETURN(LeaseEntry * lease, FindLeaseLocked(request.lease_id(), identity));
  ActiveJob* job = active_.at(lease->key.first).get();
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[lease->key.second];
  if (!request.probe_id().empty() && !lease->stored_checked && !lease->completing) {
    lease->stored_checked = true;
    checkpoint.probe_id = request.probe_id();
    if (!job->record.spec.force) {
      ASSIGN_OR_RETURN(const bool stored, store_->HasStep(job->record.spec.ns, job->record.spec.run,
                                                          request.probe_id(), checkpoint.step));
      if (stored) {
        Deliveries none;
        EndLeaseLocked(request.lease_id(), StepState::kSkipped, "", &none);
        response.set_verdict(pb::HeartbeatResponse::VERDICT_ALREADY_STORED);
        return response;
      }
    }
  }
  if (!request.fingerprint().empty() && !lease->fingerprint_checked && !lease->completing) {
    lease->fingerprint_checked = true;
    // One that is not a fingerprint is left to the upload's check, which names it.
    if (job->record.spec.dedupe && analysis::IsFingerprint(request.fingerprint())) {
      ASSIGN_OR_RETURN(const int64_t earlier,
                       store_->EarlierStepWithFingerprint(job->record.spec.ns, job->record.spec.run,
                                                          request.fingerprint(), checkpoint.step));
      if (earlier >= 0) {
        checkpoint.fingerprint = request.fingerprint();
        checkpoint.duplicate_of = earlier;
        // Set here for the warning, which must come first: ending the lease may finish the
        // job and free `checkpoint`.
        checkpoint.state = StepState::kSkipped;
        WarnDuplicate(lease->key.first, checkpoint);
        Deliveries none;
        EndLeaseLocked(request.lease_id(), StepState::kSkipped,
                       storage::DedupeSkipReason(earlier, request.fingerprint()), &none);
        response.set_verdict(pb::HeartbeatResponse::VERDICT_DUPLICATE);
        return response;
      }
    }
  }
  if (request.batches_total() > 0 && request.batches_done() != lease->batches_done) {
    lease->batches_done = request.batches_done();
    PublishStep(job, lease->key.second, pb::JobEvent::KIND_STEP_PROGRESS, request.batches_done(),
                request.batches_total());
  }
  lease->deadline = absl::Now() + options_.lease_timeout;
  response.set_verdict(pb::HeartbeatResponse::VERDICT_CONTINUE);
  response.set_lease_deadline_unix_ms(absl::ToUnixMillis(lease->deadline));
  return response;
}

absl::StatusOr<pb::CompleteWorkResponse> JobRunner::Complete(const pb::CompleteWorkRequest& request,
                                                             const std::string& identity) {
  const std::string& lease_id = request.lease_id();
  int64_t job_id = 0;
  storage::StoreMode mode;
  std::string device;
  storage::JobCheckpoint finished;
  std::string ns;
  std::string run;
  std::shared_ptr<const pb::UnitProbe> probe;
  {
    absl::MutexLock lock(&mu_);
    if ((cancelled_leases_.count(lease_id)) > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' ended: its job was cancelled"));
    }
    ASSIGN_OR_RETURN(LeaseEntry * lease, FindLeaseLocked(lease_id, identity));
    if (lease->completing) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' is already being completed"));
    }
    lease->completing = true;
    ActiveJob* job = active_.at(lease->key.first).get();
    job_id = lease->key.first;
    device = lease->device;
    mode = {job->record.spec.force, job->record.spec.dedupe};
    ns = job->record.spec.ns;
    run = job->record.spec.run;
    probe = job->probe;
    finished = job->record.checkpoints[lease->key.second];
  }
  // The upload is checked and written outside the lock: heartbeats of other leases go on.
  // `finished.probe_id` is the id the lease's heartbeat reported, if any.
  absl::StatusOr<storage::StepResult> result =
      StepResultFromUpload(request, run, finished.step, finished.path);
  if (result.ok()) {
    if (absl::Status matches = CheckUploadMatchesUnit(request, *probe, finished.probe_id);
        !matches.ok()) {
      result = matches;
    }
  }
  absl::StatusOr<storage::FinishedLease> stored = storage::FinishedLease{};
  if (!result.ok()) {
    stored = result.status();
  } else {
    result->ns = ns;
    finished.state = StepState::kDone;
    finished.error.clear();
    finished.probe_id = result->probe.id;
    finished.size_bytes = request.checkpoint_bytes();
    finished.seconds = request.seconds();
    finished.lease_id.clear();
    finished.lease_local = false;
    finished.lease_holder.clear();
    stored = store_->FinishLease(job_id, lease_id, finished, *result, mode);
    // Before the step's STEP_FINISHED, while the job is sure to be active for its watchers.
    if (stored.ok() && stored->checkpoint.state == StepState::kDone && options_.step_stored) {
      options_.step_stored(job_id, *result);
    }
  }
  Deliveries deliveries;
  absl::Status status = stored.status();
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return LeaseNotCurrent(lease_id);
    it->second->completing = false;
    const StepKey key = it->second->key;
    const bool refused = !stored.ok() && (absl::IsInvalidArgument(stored.status()) ||
                                          absl::IsFailedPrecondition(stored.status()));
    if (!stored.ok() && !refused) {
      // The store could not write now (busy, full): the lease stays; the worker retries.
      it->second->deadline = absl::Now() + options_.lease_timeout;
      status = absl::UnavailableError(absl::StrCat(
          "step ", finished.step, " not stored yet (retry): ", stored.status().message()));
    } else if (!stored.ok()) {
      const std::string error =
          absl::StrCat("upload of step ", finished.step, " refused: ", stored.status().message());
      EndLeaseLocked(lease_id, StepState::kFailed, error, &deliveries);
      status = absl::Status(stored.status().code(), error);
    } else {
      ActiveJob* job = active_.at(key.first).get();
      finished = stored->checkpoint;
      job->record.checkpoints[key.second] = finished;
      if (finished.duplicate_of >= 0) WarnDuplicate(key.first, finished);
      job->record.updated_at = stored->updated_at;
      leases_.erase(it);
      spdlog::info("job {} step {} {} in {:.2f} s by {}", key.first, finished.step,
                   storage::StepStateName(finished.state), finished.seconds, finished.worker);
      PublishStep(job, key.second, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
      MaybeFinish(key.first);
    }
  }
  for (auto& deliver : deliveries) deliver();
  if (!status.ok()) return status;
  const StepState state = stored->checkpoint.state;
  if (options_.metrics != nullptr && state == StepState::kDone) {
    options_.metrics->RecordCheckpoint(request.metrics().model_family(), device, request.seconds());
  }
  Audit({0, "", identity, ns, "complete", absl::StrCat("job ", job_id, " step ", finished.step),
         absl::StrCat("run ", run, ", ", storage::StepStateName(state), " by worker '",
                      finished.worker, "' in ", absl::SixDigits(finished.seconds), " s")});
  pb::CompleteWorkResponse response;
  response.set_state(ToProto(state));
  return response;
}

absl::Status JobRunner::Fail(const pb::FailWorkRequest& request, const std::string& identity) {
  Deliveries deliveries;
  // A worker's text, kept with the step and shown to readers: bounded.
  const std::string error = request.error().size() <= kMaxWorkerErrorBytes
                                ? request.error()
                                : absl::StrCat(request.error().substr(0, kMaxWorkerErrorBytes),
                                               " … (cut at ", kMaxWorkerErrorBytes, " bytes)");
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(LeaseEntry * lease, FindLeaseLocked(request.lease_id(), identity));
    if (lease->completing) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", request.lease_id(), "' is being completed"));
    }
    if (request.kind() == pb::FailWorkRequest::KIND_UNSPECIFIED ||
        !pb::FailWorkRequest::Kind_IsValid(request.kind())) {
      return absl::InvalidArgumentError("FailWork needs a kind: failed, retryable or released");
    }
    switch (request.kind()) {
      case pb::FailWorkRequest::KIND_FAILED:
        EndLeaseLocked(request.lease_id(), StepState::kFailed, error, &deliveries);
        break;
      case pb::FailWorkRequest::KIND_RETRYABLE:
        RetryOrFailLocked(request.lease_id(), error, &deliveries);
        break;
      case pb::FailWorkRequest::KIND_RELEASED: {
        ActiveJob* job = active_.at(lease->key.first).get();
        storage::JobCheckpoint& checkpoint = job->record.checkpoints[lease->key.second];
        checkpoint.attempt = std::max(0, checkpoint.attempt - 1);
        spdlog::info("job {} step {} given back by {}", lease->key.first, checkpoint.step,
                     checkpoint.worker);
        EndLeaseLocked(request.lease_id(), StepState::kPending, "", &deliveries);
        break;
      }
      case pb::FailWorkRequest::KIND_UNSPECIFIED:
      case pb::FailWorkRequest_Kind_FailWorkRequest_Kind_INT_MIN_SENTINEL_DO_NOT_USE_:
      case pb::FailWorkRequest_Kind_FailWorkRequest_Kind_INT_MAX_SENTINEL_DO_NOT_USE_:
        break;  // refused above
    }
  }
  for (auto& deliver : deliveries) deliver();
  return absl::OkStatus();
}

void JobRunner::RetryOrFailLocked(const std::string& lease_id, const std::string& error,
                                  Deliveries* deliveries) {
  const LeaseEntry& lease = *leases_.at(lease_id);
  const storage::JobCheckpoint& checkpoint =
      active_.at(lease.key.first)->record.checkpoints[lease.key.second];
  if (checkpoint.attempt >= options_.max_attempts) {
    EndLeaseLocked(lease_id, StepState::kFailed,
                   absl::StrCat(error, " (attempt ", checkpoint.attempt, " of ",
                                options_.max_attempts, ": giving up)"),
                   deliveries);
  } else {
    EndLeaseLocked(lease_id, StepState::kPending, error, deliveries);
  }
}

void JobRunner::EndLeaseLocked(const std::string& lease_id, StepState state,
                               const std::string& error, Deliveries* deliveries, bool finish_job) {
  auto it = leases_.find(lease_id);
  const StepKey key = it->second->key;
  leases_.erase(it);
  ActiveJob* job = active_.at(key.first).get();
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[key.second];
  checkpoint.state = state;
  checkpoint.error = error;
  checkpoint.lease_id.clear();
  checkpoint.lease_local = false;
  checkpoint.lease_holder.clear();
  SaveCheckpoint(job, key.second).IgnoreError();  // logged
  if (state == StepState::kPending) {
    if (!error.empty()) {
      spdlog::warn("job {} step {} back to pending: {}", key.first, checkpoint.step, error);
    }
    pending_.insert(key);
    DispatchLocked(deliveries);
    return;
  }
  if (state == StepState::kFailed) {
    spdlog::warn("job {} step {} failed: {}", key.first, checkpoint.step, error);
  } else {
    spdlog::info("job {} step {} {}", key.first, checkpoint.step, storage::StepStateName(state));
  }
  PublishStep(job, key.second, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
  if (finish_job) MaybeFinish(key.first);
}

void JobRunner::ReaperLoop() {
  while (true) {
    Deliveries deliveries;
    std::vector<LeaseCallback> timed_out;
    {
      absl::MutexLock lock(&mu_);
      absl::Time next = absl::Now() + absl::Seconds(1);
      for (const auto& [ticket, waiter] : waiters_) next = std::min(next, waiter->deadline);
      for (const auto& [id, lease] : leases_) next = std::min(next, lease->deadline);
      next_wake_ = next;
      reaper_wake_ = false;
      auto woken = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return draining_ || reaper_wake_; };
      mu_.AwaitWithDeadline(absl::Condition(&woken), next);
      if (draining_) return;
      const absl::Time now = absl::Now();
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->second->deadline > now) {
          ++it;
          continue;
        }
        timed_out.push_back(std::move(it->second->done));
        it = waiters_.erase(it);
      }
      std::vector<std::string> expired;
      for (const auto& [id, lease] : leases_) {
        if (!lease->completing && lease->deadline <= now) expired.push_back(id);
      }
      for (const std::string& id : expired) {
        const LeaseEntry& lease = *leases_.at(id);
        const storage::JobCheckpoint& checkpoint =
            active_.at(lease.key.first)->record.checkpoints[lease.key.second];
        RetryOrFailLocked(
            id,
            lease.local ? absl::StrCat("lease expired: embedded worker '", checkpoint.worker,
                                       "' neither delivered the step nor sent a heartbeat for ",
                                       absl::FormatDuration(options_.lease_timeout),
                                       " (its result could not be sent; see the server's log)")
                        : absl::StrCat("lease expired: worker '", checkpoint.worker,
                                       "' sent no heartbeat for ",
                                       absl::FormatDuration(options_.lease_timeout)),
            &deliveries);
      }
    }
    for (LeaseCallback& done : timed_out) done(pb::LeaseWorkResponse());
    for (auto& deliver : deliveries) deliver();
  }
}

// ---- Draining --------------------------------------------------------------------------

std::vector<JobRunner::FollowedJob> JobRunner::FollowedJobs() const {
  absl::MutexLock lock(&mu_);
  std::vector<FollowedJob> followed;
  for (const auto& [id, job] : active_) {
    if (job->cancel_requested || !StillFollowing(job->record)) continue;
    FollowedJob& entry = followed.emplace_back();
    entry.id = id;
    entry.ns = job->record.spec.ns;
    entry.dir = job->record.spec.follow_dir;
    entry.until_step = job->record.spec.until_step;
    for (const storage::JobCheckpoint& checkpoint : job->record.checkpoints) {
      entry.known_steps.insert(checkpoint.step);
    }
  }
  return followed;
}

absl::Status JobRunner::AddFollowedCheckpoints(int64_t id,
                                               std::vector<storage::CheckpointSpec> found) {
  Deliveries deliveries;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it == active_.end() || it->second->cancel_requested || draining_) {
      return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not being followed"));
    }
    ActiveJob* job = it->second.get();
    std::set<int64_t> known;
    for (const storage::JobCheckpoint& checkpoint : job->record.checkpoints) {
      known.insert(checkpoint.step);
    }
    found.erase(
        std::remove_if(found.begin(), found.end(),
                       [&](const storage::CheckpointSpec& c) { return known.count(c.step) > 0; }),
        found.end());
    if (found.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::string updated_at, store_->AddJobCheckpoints(id, found));
    for (const storage::CheckpointSpec& spec : found) {
      storage::JobCheckpoint& checkpoint = job->record.checkpoints.emplace_back();
      checkpoint.step = spec.step;
      checkpoint.path = spec.path;
      const size_t index = job->record.checkpoints.size() - 1;
      pending_.insert({id, index});
      spdlog::info("job {} follows {}: step {} added", id, job->record.spec.follow_dir, spec.step);
      PublishStep(job, index, pb::JobEvent::KIND_STEP_ADDED, 0, 0);
    }
    job->record.updated_at = std::move(updated_at);
    DispatchLocked(&deliveries);
  }
  for (auto& deliver : deliveries) deliver();
  return absl::OkStatus();
}

JobRunner::Load JobRunner::CurrentLoad() const {
  absl::MutexLock lock(&mu_);
  Load load;
  load.queued_steps = static_cast<int64_t>(pending_.size());
  load.active_leases = static_cast<int64_t>(leases_.size());
  std::set<std::string> workers;
  for (const auto& [lease_id, lease] : leases_) {
    workers.insert(active_.at(lease->key.first)->record.checkpoints[lease->key.second].worker);
  }
  for (const auto& [ticket, waiter] : waiters_) workers.insert(waiter->request.worker().name());
  load.workers = static_cast<int64_t>(workers.size());
  return load;
}

bool JobRunner::draining() const {
  absl::MutexLock lock(&mu_);
  return leasing_stopped_;
}

void JobRunner::StopLeasing() {
  std::vector<LeaseCallback> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (!leasing_stopped_) spdlog::info("job runner draining");
    leasing_stopped_ = true;
    for (auto& [ticket, waiter] : waiters_) waiting.push_back(std::move(waiter->done));
    waiters_.clear();
  }
  for (LeaseCallback& done : waiting) {
    done(absl::UnavailableError("server is shutting down; not leasing work"));
  }
}

void JobRunner::Drain() {
  StopLeasing();
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    events_.CloseAll(absl::UnavailableError("server is shutting down"));
  }
  absl::MutexLock join_lock(&join_mu_);
  if (reaper_.joinable()) reaper_.join();
}

// ---- Store and events ------------------------------------------------------------------

absl::Status JobRunner::SaveCheckpoint(ActiveJob* job, size_t index) {
  absl::StatusOr<std::string> updated_at =
      store_->UpdateCheckpoint(job->record.id, job->record.checkpoints[index]);
  if (!updated_at.ok()) {
    spdlog::error("job {}: storing checkpoint state failed: {}", job->record.id,
                  updated_at.status().ToString());
    return updated_at.status();
  }
  job->record.updated_at = *std::move(updated_at);
  return absl::OkStatus();
}

void JobRunner::SaveJobState(ActiveJob* job) {
  absl::StatusOr<std::string> updated_at =
      store_->SetJobState(job->record.id, job->record.state, job->record.error);
  if (!updated_at.ok()) {
    spdlog::error("job {}: storing job state failed: {}", job->record.id,
                  updated_at.status().ToString());
    return;
  }
  job->record.updated_at = *std::move(updated_at);
}

void JobRunner::PublishStep(ActiveJob* job, size_t index, int kind, int done, int total) {
  if (events_.NumWatchers(job->record.id) == 0) return;
  pb::JobEvent event;
  event.set_kind(static_cast<pb::JobEvent::Kind>(kind));
  ToProto(job->record, event.mutable_job());
  ToProto(job->record.checkpoints[index], event.mutable_checkpoint());
  event.set_batches_done(done);
  event.set_batches_total(total);
  events_.Publish(job->record.id, event);
}

void JobRunner::MaybeFinish(int64_t job_id) {
  if (draining_) return;
  auto it = active_.find(job_id);
  if (it == active_.end()) return;
  ActiveJob* job = it->second.get();
  if (!job->cancel_requested && StillFollowing(job->record)) return;
  int failed = 0;
  for (const storage::JobCheckpoint& checkpoint : job->record.checkpoints) {
    if (checkpoint.state == StepState::kPending || checkpoint.state == StepState::kRunning) {
      return;
    }
    if (checkpoint.state == StepState::kFailed) ++failed;
  }
  if (!job->cancel_requested) {
    if (failed > 0) {
      job->record.state = JobState::kFailed;
      job->record.error =
          absl::StrCat(failed, " of ", job->record.checkpoints.size(), " checkpoints failed");
    } else {
      job->record.state = JobState::kSucceeded;
      job->record.error.clear();
    }
    SaveJobState(job);
  }
  spdlog::info("job {} {}{}{}", job_id, storage::JobStateName(job->record.state),
               job->record.error.empty() ? "" : ": ", job->record.error);
  pb::JobEvent event;
  event.set_kind(pb::JobEvent::KIND_JOB_FINISHED);
  ToProto(job->record, event.mutable_job());
  events_.Publish(job_id, event);
  active_.erase(it);
}

}  // namespace anisoscope::server
