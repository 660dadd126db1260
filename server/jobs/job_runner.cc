#include "server/jobs/job_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "proto/final_states.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {
namespace {

using storage::JobState;
using storage::StepState;

// The longest error text of a worker's FailWork kept with the step.
constexpr size_t kMaxWorkerErrorBytes = 4096;

bool IsFinal(JobState state) { return pb::IsFinal(ToProto(state)); }

}  // namespace

struct JobRunner::Waiter {
  pb::LeaseWorkRequest request;
  LeaseCaller caller;
  absl::Time deadline;
  LeaseCallback done;
};

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(const Options& options,
                                                             storage::JobStore* store,
                                                             std::vector<ResumedJob> resumed) {
  if (store == nullptr) return absl::InvalidArgumentError("a job store is required");
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
  RETURN_IF_ERROR(runner->Resume(std::move(resumed)));
  runner->reaper_ = std::thread(&JobRunner::ReaperLoop, runner.get());
  return runner;
}

JobRunner::JobRunner(const Options& options, storage::JobStore* store)
    : options_(options),
      store_(store),
      registry_({options.max_attempts, options.max_leases_per_worker, options.lease_timeout,
                 options.dtype},
                store, &events_) {}

JobRunner::~JobRunner() { Drain(); }

// ---- Jobs ------------------------------------------------------------------------------

absl::Status JobRunner::Resume(std::vector<ResumedJob> resumed) {
  absl::MutexLock lock(&mu_);
  for (ResumedJob& job : resumed) {
    storage::JobRecord& record = job.record;
    int left = 0;
    for (storage::JobCheckpoint& checkpoint : record.checkpoints) {
      left += checkpoint.state == StepState::kPending || checkpoint.state == StepState::kRunning;
      if (checkpoint.state != StepState::kRunning ||
          !(checkpoint.lease_local || checkpoint.lease_id.empty())) {
        continue;  // a remote lease gets one lease_timeout to check in (JobRegistry::Add)
      }
      // The embedded worker died with the server: not the step's fault.
      checkpoint.state = StepState::kPending;
      checkpoint.attempt = std::max(0, checkpoint.attempt - 1);
      checkpoint.lease_id.clear();
      checkpoint.lease_local = false;
      checkpoint.lease_holder.clear();
      ASSIGN_OR_RETURN(record.updated_at, store_->UpdateCheckpoint(record.id, checkpoint));
    }
    spdlog::info("resuming job {} (run {}): {} of {} checkpoints left", record.id, record.spec.run,
                 left, record.checkpoints.size());
    registry_.Add(std::move(record), std::move(job.inputs));
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::JobRecord> JobRunner::Submit(const storage::JobSpec& spec,
                                                     JobInputs inputs, const std::string& actor) {
  if (draining()) return absl::UnavailableError("server is shutting down; not accepting jobs");
  if (spec.checkpoints.empty() && spec.follow_dir.empty()) {
    return absl::InvalidArgumentError("the job has no checkpoints");
  }
  ASSIGN_OR_RETURN(const int64_t id, store_->CreateJob(spec, inputs.probe.SerializeAsString()));
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
    registry_.Add(record, std::move(inputs));
    DispatchLocked(&deliveries);
  }
  for (auto& deliver : deliveries) deliver();
  return record;
}

absl::StatusOr<storage::JobRecord> JobRunner::Cancel(int64_t id, const std::string& actor) {
  std::optional<storage::JobRecord> cancelled;
  std::set<std::string> stopped_workers;
  CancelListener listener;
  {
    absl::MutexLock lock(&mu_);
    JobRegistry::ActiveJob* job = registry_.Find(id);
    if (job != nullptr && !job->cancel_requested) {
      const std::string ns = job->record.spec.ns;
      const std::string run = job->record.spec.run;
      stopped_workers = registry_.LocalWorkersOf(id);
      cancelled = registry_.Cancel(job);  // may end the job: `job` is gone
      spdlog::info("job {} cancelled by {}", id, actor);
      Audit({0, "", actor, ns, "cancel", absl::StrCat("job ", id), absl::StrCat("run ", run)});
      listener = cancel_listener_;
    }
  }
  if (cancelled.has_value()) {
    if (listener && !stopped_workers.empty()) listener(stopped_workers);
    return *std::move(cancelled);
  }
  ASSIGN_OR_RETURN(const storage::JobRecord record, store_->GetJob(id));
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", id, " has already ", storage::JobStateName(record.state), "; nothing to cancel"));
}

absl::StatusOr<storage::JobRecord> JobRunner::Get(int64_t id) {
  {
    absl::MutexLock lock(&mu_);
    if (const JobRegistry::ActiveJob* job = registry_.Find(id)) return job->record;
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
    if (const JobRegistry::ActiveJob* job = registry_.Find(id)) {
      ToProto(job->record, snapshot.mutable_job());
      watcher->OnEvent(snapshot);
      events_.Subscribe(id, watcher);
      return absl::OkStatus();
    }
  }
  // Not active: final (jobs leave the registry only after their final state is stored).
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
  registry_.PublishAlarm(id, alarm);
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
  absl::Status refused;
  std::optional<JobRegistry::Grant> grant;
  {
    absl::MutexLock lock(&mu_);
    if (leasing_stopped_) {
      refused = absl::UnavailableError("server is shutting down; not leasing work");
    } else if (!caller.local) {
      refused = registry_.CheckCap(caller.identity, WaitingOf(caller.identity));
    }
    if (refused.ok()) {
      grant = ReserveLocked(waiter);
      if (!grant.has_value() && waiter.deadline > absl::Now()) {
        if (waiter.deadline < next_wake_) reaper_wake_ = true;
        waiter.done = std::move(done);
        waiters_[ticket] = std::make_unique<Waiter>(std::move(waiter));
        return;
      }
    }
  }
  if (!refused.ok()) {
    done(refused);
  } else if (grant.has_value()) {
    done(FinishGrant(*std::move(grant)));
  } else {
    done(pb::LeaseWorkResponse());
  }
}

bool JobRunner::WithdrawLease(int64_t ticket) {
  absl::MutexLock lock(&mu_);
  return waiters_.erase(ticket) > 0;
}

int JobRunner::WaitingOf(const std::string& identity) const {
  int waiting = 0;
  for (const auto& [ticket, waiter] : waiters_) {
    waiting += !waiter->caller.local && waiter->caller.identity == identity;
  }
  return waiting;
}

std::optional<JobRegistry::Grant> JobRunner::ReserveLocked(const Waiter& waiter) {
  std::optional<StepKey> first = registry_.FirstPending(waiter.caller.scope);
  while (first.has_value() && registry_.FailIfDamaged(*first)) {
    first = registry_.FirstPending(waiter.caller.scope);  // that step failed on the server
  }
  if (!first.has_value()) return std::nullopt;
  return registry_.Reserve(*first, {waiter.caller.identity, waiter.caller.local,
                                    waiter.request.worker().name(),
                                    waiter.request.worker().device()});
}

absl::StatusOr<pb::LeaseWorkResponse> JobRunner::FinishGrant(JobRegistry::Grant grant) {
  const int64_t job_id = grant.key.first;
  const absl::StatusOr<std::string> stored = store_->UpdateCheckpoint(job_id, grant.checkpoint);
  absl::StatusOr<std::string> started = absl::UnknownError("not stored");
  if (stored.ok() && grant.starts_job) {
    started = store_->SetJobState(job_id, JobState::kRunning, "");
    if (!started.ok()) {
      spdlog::error("job {}: storing job state failed: {}", job_id, started.status().ToString());
    }
  }
  Deliveries deliveries;
  absl::StatusOr<bool> leased = false;
  {
    absl::MutexLock lock(&mu_);
    bool pending = false;
    leased = registry_.GrantStored(grant, stored, started, &pending);
    if (leased.ok() && *leased) {
      const absl::Time deadline = absl::FromUnixMillis(grant.response.unit().lease_deadline_unix_ms());
      if (deadline < next_wake_) reaper_wake_ = true;
    }
    if (pending) DispatchLocked(&deliveries);
  }
  for (auto& deliver : deliveries) deliver();
  if (!leased.ok()) return leased.status();
  if (!*leased) return pb::LeaseWorkResponse();  // its job was cancelled meanwhile
  return std::move(grant.response);
}

void JobRunner::DispatchLocked(Deliveries* deliveries) {
  if (leasing_stopped_) return;
  // Oldest wait first; a wait with nothing pending in its namespace keeps waiting.
  for (auto it = waiters_.begin(); it != waiters_.end() && registry_.has_pending();) {
    std::optional<JobRegistry::Grant> grant = ReserveLocked(*it->second);
    if (!grant.has_value()) {
      ++it;
      continue;
    }
    deliveries->push_back([this, done = std::move(it->second->done),
                           grant = std::make_shared<JobRegistry::Grant>(*std::move(grant))] {
      done(FinishGrant(std::move(*grant)));
    });
    it = waiters_.erase(it);
  }
}

absl::StatusOr<pb::HeartbeatResponse> JobRunner::Heartbeat(const pb::HeartbeatRequest& request,
                                                           const std::string& identity) {
  VerdictQuestion question;
  {
    absl::MutexLock lock(&mu_);
    if (registry_.WasCancelled(request.lease_id())) return JobRegistry::Cancelled();
    ASSIGN_OR_RETURN(LeaseEntry * lease, registry_.FindLease(request.lease_id(), identity));
    question = registry_.QuestionFor(lease, request);
    if (question.probe_id.empty() && question.fingerprint.empty()) {
      return registry_.ApplyVerdict(lease, request, Verdict{});
    }
  }
  // The store is asked outside the lock; the lease may have ended meanwhile.
  ASSIGN_OR_RETURN(const Verdict verdict, AskStore(*store_, question));
  absl::MutexLock lock(&mu_);
  if (registry_.WasCancelled(request.lease_id())) return JobRegistry::Cancelled();
  ASSIGN_OR_RETURN(LeaseEntry * lease, registry_.FindLease(request.lease_id(), identity));
  return registry_.ApplyVerdict(lease, request, verdict);
}

absl::StatusOr<pb::CompleteWorkResponse> JobRunner::Complete(const pb::CompleteWorkRequest& request,
                                                             const std::string& identity) {
  const std::string& lease_id = request.lease_id();
  Completion completion;
  {
    absl::MutexLock lock(&mu_);
    if (registry_.WasCancelled(lease_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' ended: its job was cancelled"));
    }
    ASSIGN_OR_RETURN(LeaseEntry * lease, registry_.FindLease(lease_id, identity));
    if (lease->completing) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' is already being completed"));
    }
    lease->completing = true;
    const storage::JobRecord& record = registry_.Record(lease->key);
    completion = {lease->key.first, lease_id, record.spec.ns, record.spec.run,
                  {record.spec.force, record.spec.dedupe}, lease->device,
                  registry_.Find(lease->key.first)->probe, registry_.Checkpoint(lease->key)};
  }
  // Checked and written outside the lock: heartbeats of other leases go on.
  absl::StatusOr<storage::FinishedLease> stored =
      StoreCompletion(request, completion, *store_, options_.observers, *this);
  const int64_t step = completion.checkpoint.step;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(registry_.EndCompletion(lease_id, step, stored));
  }
  const storage::JobCheckpoint& finished = stored->checkpoint;
  Audit({0, "", identity, completion.ns, "complete",
         absl::StrCat("job ", completion.job_id, " step ", step),
         absl::StrCat("run ", completion.run, ", ", storage::StepStateName(finished.state),
                      " by worker '", finished.worker, "' in ", absl::SixDigits(finished.seconds),
                      " s")});
  pb::CompleteWorkResponse response;
  response.set_state(ToProto(finished.state));
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
    ASSIGN_OR_RETURN(LeaseEntry * lease, registry_.FindLease(request.lease_id(), identity));
    if (lease->completing) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", request.lease_id(), "' is being completed"));
    }
    ASSIGN_OR_RETURN(const bool pending,
                     registry_.EndFailed(request.lease_id(), request.kind(), error));
    if (pending) DispatchLocked(&deliveries);
  }
  for (auto& deliver : deliveries) deliver();
  return absl::OkStatus();
}

void JobRunner::SetLocalCancelListener(CancelListener listener) {
  absl::MutexLock lock(&mu_);
  cancel_listener_ = std::move(listener);
}

void JobRunner::FailLocalLeases(const std::string& worker, const std::string& error) {
  std::vector<std::pair<std::string, std::string>> leases;
  {
    absl::MutexLock lock(&mu_);
    leases = registry_.LocalLeasesOf(worker);
  }
  for (const auto& [lease_id, holder] : leases) {
    pb::FailWorkRequest request;
    request.set_lease_id(lease_id);
    request.set_kind(pb::FailWorkRequest::KIND_FAILED);
    request.set_error(error);
    Fail(request, holder).IgnoreError();  // ended meanwhile otherwise: nothing to do
  }
}

void JobRunner::ReaperLoop() {
  while (true) {
    Deliveries deliveries;
    std::vector<LeaseCallback> timed_out;
    {
      absl::MutexLock lock(&mu_);
      absl::Time next = std::min(absl::Now() + absl::Seconds(1), registry_.NextLeaseDeadline());
      for (const auto& [ticket, waiter] : waiters_) next = std::min(next, waiter->deadline);
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
      if (registry_.ExpireLeases(now)) DispatchLocked(&deliveries);
    }
    for (LeaseCallback& done : timed_out) done(pb::LeaseWorkResponse());
    for (auto& deliver : deliveries) deliver();
  }
}

// ---- Following, load, draining ---------------------------------------------------------

std::vector<JobRunner::FollowedJob> JobRunner::FollowedJobs() const {
  absl::MutexLock lock(&mu_);
  return registry_.FollowedJobs();
}

absl::Status JobRunner::AddFollowedCheckpoints(int64_t id,
                                               std::vector<storage::CheckpointSpec> found) {
  Deliveries deliveries;
  {
    absl::MutexLock lock(&mu_);
    // FAILED_PRECONDITION once Drain has stopped the registry (StopFinishing).
    ASSIGN_OR_RETURN(const bool added, registry_.AddFollowed(id, std::move(found)));
    if (added) DispatchLocked(&deliveries);
  }
  for (auto& deliver : deliveries) deliver();
  return absl::OkStatus();
}

JobRunner::Load JobRunner::CurrentLoad() const {
  absl::MutexLock lock(&mu_);
  Load load;
  load.queued_steps = registry_.queued_steps();
  load.active_leases = registry_.active_leases();
  std::set<std::string> workers = registry_.LeaseWorkers();
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
    registry_.StopFinishing();
    events_.CloseAll(absl::UnavailableError("server is shutting down"));
  }
  absl::MutexLock join_lock(&join_mu_);
  if (reaper_.joinable()) reaper_.join();
}

}  // namespace anisoscope::server
