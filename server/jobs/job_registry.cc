#include "server/jobs/job_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/checkpoint/fingerprint.h"
#include "common/message_limits.h"
#include "common/random_id.h"
#include "server/jobs/source_steps.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;
using storage::JobState;
using storage::StepState;

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

// ---- Jobs ------------------------------------------------------------------------------

void JobRegistry::Add(storage::JobRecord record, JobInputs inputs) {
  const int64_t id = record.id;
  auto job = std::make_unique<ActiveJob>();
  job->record = std::move(record);
  job->probe = std::make_shared<const pb::UnitProbe>(std::move(inputs.probe));
  job->roots = std::move(inputs.roots);
  for (size_t i = 0; i < job->record.checkpoints.size(); ++i) {
    storage::JobCheckpoint& checkpoint = job->record.checkpoints[i];
    if (checkpoint.state == StepState::kPending) pending_.insert({id, i});
    if (checkpoint.state == StepState::kRunning && !checkpoint.lease_id.empty()) {
      // A remote worker's lease from before a restart: one lease_timeout to check in.
      LeaseEntry entry;
      entry.key = {id, i};
      entry.holder = checkpoint.lease_holder;
      entry.deadline = absl::Now() + options_.lease_timeout;
      leases_.Add(checkpoint.lease_id, std::move(entry));
    }
  }
  active_[id] = std::move(job);
  MaybeFinish(id);
}

JobRegistry::ActiveJob* JobRegistry::Find(int64_t id) {
  const auto it = active_.find(id);
  return it == active_.end() ? nullptr : it->second.get();
}

storage::JobRecord JobRegistry::Cancel(ActiveJob* job) {
  const int64_t id = job->record.id;
  job->cancel_requested = true;
  job->record.state = JobState::kCancelled;
  job->record.error.clear();
  SaveJobState(job);
  for (auto p = pending_.lower_bound({id, 0}); p != pending_.end() && p->first == id;) {
    const size_t index = p->second;
    p = pending_.erase(p);
    job->record.checkpoints[index].state = StepState::kCancelled;
    SaveCheckpoint(job, index).IgnoreError();  // logged
    PublishStep(job, index, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
  }
  for (const std::string& lease_id : leases_.IdleLeasesOf(id)) {
    EndLease(lease_id, StepState::kCancelled, "", /*finish_job=*/false);
    leases_.MarkCancelled(lease_id);
  }
  storage::JobRecord copy = job->record;
  MaybeFinish(id);
  return copy;
}

absl::StatusOr<bool> JobRegistry::AddFollowed(int64_t id,
                                              std::vector<storage::CheckpointSpec> found) {
  ActiveJob* job = Find(id);
  if (job == nullptr || job->cancel_requested || draining_) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not being followed"));
  }
  std::set<int64_t> known;
  for (const storage::JobCheckpoint& checkpoint : job->record.checkpoints) {
    known.insert(checkpoint.step);
  }
  found.erase(
      std::remove_if(found.begin(), found.end(),
                     [&](const storage::CheckpointSpec& c) { return known.count(c.step) > 0; }),
      found.end());
  if (found.empty()) return false;
  absl::StatusOr<std::string> updated_at = store_->AddJobCheckpoints(id, found);
  if (!updated_at.ok()) return updated_at.status();
  bool any_final = false;  // a listed duplicate (skipped) or unusable step (failed)
  for (const storage::CheckpointSpec& spec : found) {
    storage::JobCheckpoint& checkpoint = job->record.checkpoints.emplace_back();
    checkpoint.step = spec.step;
    checkpoint.path = spec.path;
    checkpoint.remote = spec.remote;
    checkpoint.revision = spec.revision;
    checkpoint.commit = spec.commit;
    checkpoint.state = spec.state;  // a listed duplicate comes skipped
    checkpoint.error = spec.error;
    checkpoint.duplicate_of = spec.duplicate_of;
    const size_t index = job->record.checkpoints.size() - 1;
    if (checkpoint.state == StepState::kPending) pending_.insert({id, index});
    any_final = any_final || checkpoint.state != StepState::kPending;
    spdlog::info("job {} follows {}: step {} added", id, job->record.spec.follow_dir, spec.step);
    PublishStep(job, index, pb::JobEvent::KIND_STEP_ADDED, 0, 0);
  }
  job->record.updated_at = *std::move(updated_at);
  // Nothing else ends a job whose last added step (at until_step) came already final.
  if (any_final) MaybeFinish(id);  // may free `job`
  return true;
}

std::vector<JobRegistry::FollowedJob> JobRegistry::FollowedJobs() const {
  std::vector<FollowedJob> followed;
  for (const auto& [id, job] : active_) {
    if (job->cancel_requested || !StillFollowing(job->record)) continue;
    FollowedJob& entry = followed.emplace_back();
    entry.id = id;
    entry.ns = job->record.spec.ns;
    entry.dir = job->record.spec.follow_dir;
    entry.until_step = job->record.spec.until_step;
    entry.source = job->record.spec.source;
    entry.dedupe = job->record.spec.dedupe;
    for (const storage::JobCheckpoint& checkpoint : job->record.checkpoints) {
      entry.known_steps.insert(checkpoint.step);
    }
  }
  return followed;
}

void JobRegistry::PublishAlarm(int64_t id, const pb::Alarm& alarm) {
  const ActiveJob* job = Find(id);
  if (job == nullptr || events_->NumWatchers(id) == 0) return;
  pb::JobEvent event;
  event.set_kind(pb::JobEvent::KIND_ALARM);
  ToProto(job->record, event.mutable_job());
  *event.mutable_alarm() = alarm;
  events_->Publish(id, event);
}

// ---- Steps and leases ------------------------------------------------------------------

std::optional<StepKey> JobRegistry::FirstPending(const std::string& scope) const {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (scope == storage::kAnyNamespace || active_.at(it->first)->record.spec.ns == scope) {
      return *it;
    }
    it = pending_.lower_bound({it->first + 1, 0});  // the next job's first pending step
  }
  return std::nullopt;
}

storage::JobCheckpoint& JobRegistry::Checkpoint(StepKey key) {
  return active_.at(key.first)->record.checkpoints[key.second];
}

JobRegistry::Grant JobRegistry::Reserve(StepKey key, const Grantee& grantee) {
  Grant grant;
  grant.key = key;
  grant.lease_id = RandomId128();
  ActiveJob* job = active_.at(key.first).get();
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[key.second];
  grant.before = checkpoint;
  checkpoint.state = StepState::kRunning;
  checkpoint.error.clear();
  checkpoint.probe_id.clear();  // the lease's heartbeat reports it
  checkpoint.attempt += 1;
  checkpoint.lease_id = grant.lease_id;
  checkpoint.lease_local = grantee.local;
  checkpoint.lease_holder = grantee.identity;
  checkpoint.worker = grantee.worker;
  grant.checkpoint = checkpoint;
  pending_.erase(key);
  grant.starts_job = job->record.state == JobState::kQueued && !job->start_storing;
  job->start_storing = job->start_storing || grant.starts_job;

  LeaseEntry entry;
  entry.key = key;
  entry.holder = grantee.identity;
  entry.local = grantee.local;
  entry.storing = true;
  entry.device = grantee.device;
  leases_.Add(grant.lease_id, std::move(entry));

  pb::WorkUnit* unit = grant.response.mutable_unit();
  unit->set_lease_id(grant.lease_id);
  unit->set_job_id(key.first);
  unit->set_run(job->record.spec.run);
  unit->set_step(checkpoint.step);
  unit->set_checkpoint_path(checkpoint.path);
  // A remote step: the worker fetches it into its cache (whose folder is then its root for the
  // unit) from its own endpoints; the path only names it. The namespace's roots are sent all
  // the same (a unit without roots is refused), read by the worker only for folders. A step
  // whose descriptor does not parse is failed before (FailIfDamaged): cleared here is never.
  if (!checkpoint.remote.empty() && !unit->mutable_remote()->ParseFromString(checkpoint.remote)) {
    unit->clear_remote();
  }
  *unit->mutable_probe() = *job->probe;
  unit->mutable_options()->set_dtype(options_.dtype);
  unit->set_heartbeat_interval_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(options_.lease_timeout / 4)));
  unit->set_attempt(checkpoint.attempt);
  for (const std::string& root : job->roots) unit->add_allowed_roots(root);
  AddReadAhead(*job, key, unit);
  return grant;
}

void JobRegistry::AddReadAhead(const ActiveJob& job, StepKey key, pb::WorkUnit* unit) const {
  const auto next = pending_.lower_bound({key.first, 0});
  if (next == pending_.end() || next->first != key.first) return;
  const storage::JobCheckpoint& upcoming = job.record.checkpoints[next->second];
  if (upcoming.remote.empty()) {
    unit->set_next_checkpoint_path(upcoming.path);
    return;
  }
  pb::RemoteCheckpoint remote;
  if (!remote.ParseFromString(upcoming.remote)) return;  // its own lease fails it
  // Read-ahead only: left out rather than let the unit near the message bound.
  if (unit->ByteSizeLong() + remote.ByteSizeLong() > size_t{kMaxMessageBytes} / 2) return;
  *unit->mutable_next_remote() = std::move(remote);
}

bool JobRegistry::FailIfDamaged(StepKey key) {
  ActiveJob* job = active_.at(key.first).get();
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[key.second];
  pb::RemoteCheckpoint remote;
  if (checkpoint.remote.empty() || remote.ParseFromString(checkpoint.remote)) return false;
  pending_.erase(key);
  checkpoint.state = StepState::kFailed;
  checkpoint.error =
      absl::StrCat("stored remote descriptor of step ", checkpoint.step, " is damaged");
  spdlog::error("job {} step {}: {}", key.first, checkpoint.step, checkpoint.error);
  SaveCheckpoint(job, key.second).IgnoreError();  // logged
  PublishStep(job, key.second, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
  RequeueListedDuplicatesOf(job, checkpoint.step);
  MaybeFinish(key.first);
  return true;
}

bool JobRegistry::RequeueListedDuplicatesOf(ActiveJob* job, int64_t step) {
  if (job->cancel_requested) return false;
  bool requeued = false;
  const std::string reason = ListedDuplicateReason(step);
  for (size_t i = 0; i < job->record.checkpoints.size(); ++i) {
    storage::JobCheckpoint& checkpoint = job->record.checkpoints[i];
    if (checkpoint.state != StepState::kSkipped || checkpoint.duplicate_of != step ||
        checkpoint.error != reason) {
      continue;
    }
    checkpoint.state = StepState::kPending;
    checkpoint.duplicate_of = -1;
    checkpoint.error.clear();
    spdlog::info("job {} step {} back to pending: step {}, whose weights it shares, failed",
                 job->record.id, checkpoint.step, step);
    SaveCheckpoint(job, i).IgnoreError();  // logged
    pending_.insert({job->record.id, i});
    PublishStep(job, i, pb::JobEvent::KIND_STEP_ADDED, 0, 0);
    requeued = true;
  }
  return requeued;
}

absl::StatusOr<bool> JobRegistry::GrantStored(Grant& grant,
                                              const absl::StatusOr<std::string>& stored,
                                              const absl::StatusOr<std::string>& started,
                                              bool* pending) {
  *pending = false;
  const int64_t job_id = grant.key.first;
  ActiveJob* job = active_.at(job_id).get();  // a running step keeps its job active
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[grant.key.second];
  LeaseEntry* lease = leases_.Find(grant.lease_id);  // current: nothing ends a storing lease
  lease->storing = false;
  if (grant.starts_job) job->start_storing = false;
  if (!stored.ok()) {
    spdlog::error("job {}: storing a lease failed: {}", job_id, stored.status().ToString());
    checkpoint = grant.before;  // the lease exists only once it is stored
    leases_.Remove(grant.lease_id);
    if (job->cancel_requested) {
      checkpoint.state = StepState::kCancelled;
      SaveCheckpoint(job, grant.key.second).IgnoreError();  // logged
      PublishStep(job, grant.key.second, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
      MaybeFinish(job_id);
    } else {
      pending_.insert(grant.key);  // for the next lease call: the store refuses writes now
    }
    return absl::UnavailableError(
        absl::StrCat("cannot store a lease (retry later): ", stored.status().message()));
  }
  job->record.updated_at = std::max(job->record.updated_at, *stored);
  if (grant.starts_job && started.ok()) {
    job->record.updated_at = std::max(job->record.updated_at, *started);
    if (!job->cancel_requested) job->record.state = JobState::kRunning;
  }
  if (job->cancel_requested) {
    if (grant.starts_job) SaveJobState(job);  // cancelled, after the running state
    *pending = EndLease(grant.lease_id, StepState::kCancelled, "");
    leases_.MarkCancelled(grant.lease_id);
    return false;
  }
  lease->deadline = absl::Now() + options_.lease_timeout;
  grant.response.mutable_unit()->set_lease_deadline_unix_ms(absl::ToUnixMillis(lease->deadline));
  spdlog::info("job {} step {} leased to {} ({}attempt {}, lease {})", job_id, checkpoint.step,
               checkpoint.worker, lease->local ? "embedded, " : "", checkpoint.attempt,
               grant.lease_id);
  PublishStep(job, grant.key.second, pb::JobEvent::KIND_STEP_STARTED, 0, 0);
  return true;
}

absl::StatusOr<LeaseEntry*> JobRegistry::FindLease(const std::string& lease_id,
                                                   const std::string& identity) {
  bool adopted = false;
  absl::StatusOr<LeaseEntry*> lease = leases_.FindHeldBy(lease_id, identity, &adopted);
  if (!lease.ok()) return lease;
  if ((*lease)->storing) return LeaseNotCurrent(lease_id);  // not yet handed to its worker
  if (adopted) {
    ActiveJob* job = active_.at((*lease)->key.first).get();
    job->record.checkpoints[(*lease)->key.second].lease_holder = identity;
    SaveCheckpoint(job, (*lease)->key.second).IgnoreError();  // logged; kept in memory anyway
  }
  return lease;
}

void JobRegistry::Extend(LeaseEntry* lease, int batches_done, int batches_total) {
  if (batches_total > 0) {  // the forward has begun: the download is over
    active_.at(lease->key.first)->record.checkpoints[lease->key.second].fetch.reset();
  }
  if (batches_total > 0 && batches_done != lease->batches_done) {
    lease->batches_done = batches_done;
    PublishStep(active_.at(lease->key.first).get(), lease->key.second,
                pb::JobEvent::KIND_STEP_PROGRESS, batches_done, batches_total);
  }
  lease->deadline = absl::Now() + options_.lease_timeout;
}

bool JobRegistry::EndLease(const std::string& lease_id, StepState state, const std::string& error,
                           bool finish_job) {
  const StepKey key = leases_.Remove(lease_id).key;
  ActiveJob* job = active_.at(key.first).get();
  storage::JobCheckpoint& checkpoint = job->record.checkpoints[key.second];
  checkpoint.state = state;
  checkpoint.error = error;
  checkpoint.lease_id.clear();
  checkpoint.lease_local = false;
  checkpoint.lease_holder.clear();
  checkpoint.fetch.reset();
  SaveCheckpoint(job, key.second).IgnoreError();  // logged
  if (state == StepState::kPending) {
    if (!error.empty()) {
      spdlog::warn("job {} step {} back to pending: {}", key.first, checkpoint.step, error);
    }
    pending_.insert(key);
    return true;
  }
  if (state == StepState::kFailed) {
    spdlog::warn("job {} step {} failed: {}", key.first, checkpoint.step, error);
  } else {
    spdlog::info("job {} step {} {}", key.first, checkpoint.step, storage::StepStateName(state));
  }
  PublishStep(job, key.second, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
  const bool requeued =
      state == StepState::kFailed && RequeueListedDuplicatesOf(job, checkpoint.step);
  if (finish_job) MaybeFinish(key.first);
  return requeued;
}

bool JobRegistry::RetryOrFail(const std::string& lease_id, const std::string& error) {
  const storage::JobCheckpoint& checkpoint = Checkpoint(leases_.Find(lease_id)->key);
  if (checkpoint.attempt >= options_.max_attempts) {
    return EndLease(lease_id, StepState::kFailed,
                    absl::StrCat(error, " (attempt ", checkpoint.attempt, " of ",
                                 options_.max_attempts, ": giving up)"));
  }
  return EndLease(lease_id, StepState::kPending, error);
}

void JobRegistry::EndDuplicate(const std::string& lease_id, const std::string& fingerprint,
                               int64_t earlier) {
  const StepKey key = leases_.Find(lease_id)->key;
  storage::JobCheckpoint& checkpoint = Checkpoint(key);
  checkpoint.fingerprint = fingerprint;
  checkpoint.duplicate_of = earlier;
  // Set here for the warning, which must come first: ending the lease may finish the job and
  // free `checkpoint`.
  checkpoint.state = StepState::kSkipped;
  WarnDuplicate(key.first, checkpoint);
  EndLease(lease_id, StepState::kSkipped, storage::DedupeSkipReason(earlier, fingerprint));
}

VerdictQuestion JobRegistry::QuestionFor(LeaseEntry* lease, const pb::HeartbeatRequest& request) {
  VerdictQuestion question;
  if (lease->completing) return question;
  storage::JobCheckpoint& checkpoint = Checkpoint(lease->key);
  const storage::JobSpec& spec = Record(lease->key).spec;
  if (!request.probe_id().empty() && !lease->stored_checked) {
    lease->stored_checked = true;
    checkpoint.probe_id = request.probe_id();
    if (!spec.force) question.probe_id = request.probe_id();
  }
  if (!request.fingerprint().empty() && !lease->fingerprint_checked) {
    lease->fingerprint_checked = true;
    // One that is not a fingerprint is left to the upload's check, which names it.
    if (spec.dedupe && analysis::IsFingerprint(request.fingerprint())) {
      question.fingerprint = request.fingerprint();
    }
  }
  if (question.probe_id.empty() && question.fingerprint.empty()) return question;
  question.ns = spec.ns;
  question.run = spec.run;
  question.step = checkpoint.step;
  return question;
}

pb::HeartbeatResponse JobRegistry::ApplyVerdict(LeaseEntry* lease,
                                                const pb::HeartbeatRequest& request,
                                                const Verdict& verdict) {
  pb::HeartbeatResponse response;
  if (verdict.kind == Verdict::Kind::kContinue || lease->completing) {
    if (request.has_fetch()) PublishFetching(lease, request.fetch());
    Extend(lease, request.batches_done(), request.batches_total());
    response.set_verdict(pb::HeartbeatResponse::VERDICT_CONTINUE);
    response.set_lease_deadline_unix_ms(absl::ToUnixMillis(lease->deadline));
  } else if (verdict.kind == Verdict::Kind::kAlreadyStored) {
    EndLease(request.lease_id(), StepState::kSkipped, "");
    response.set_verdict(pb::HeartbeatResponse::VERDICT_ALREADY_STORED);
  } else {
    EndDuplicate(request.lease_id(), request.fingerprint(), verdict.duplicate_of);
    response.set_verdict(pb::HeartbeatResponse::VERDICT_DUPLICATE);
  }
  return response;
}

pb::HeartbeatResponse JobRegistry::Cancelled() {
  pb::HeartbeatResponse response;
  response.set_verdict(pb::HeartbeatResponse::VERDICT_CANCELLED);
  return response;
}

absl::StatusOr<bool> JobRegistry::EndFailed(const std::string& lease_id,
                                            pb::FailWorkRequest::Kind kind,
                                            const std::string& error) {
  switch (kind) {
    case pb::FailWorkRequest::KIND_FAILED:
      return EndLease(lease_id, StepState::kFailed, error);
    case pb::FailWorkRequest::KIND_RETRYABLE:
      return RetryOrFail(lease_id, error);
    case pb::FailWorkRequest::KIND_RELEASED: {
      const StepKey key = leases_.Find(lease_id)->key;
      storage::JobCheckpoint& checkpoint = Checkpoint(key);
      checkpoint.attempt = std::max(0, checkpoint.attempt - 1);
      spdlog::info("job {} step {} given back by {}", key.first, checkpoint.step,
                   checkpoint.worker);
      return EndLease(lease_id, StepState::kPending, "");
    }
    default:
      return absl::InvalidArgumentError("FailWork needs a kind: failed, retryable or released");
  }
}

absl::Status JobRegistry::EndCompletion(const std::string& lease_id, int64_t step,
                                        const absl::StatusOr<storage::FinishedLease>& stored) {
  LeaseEntry* lease = leases_.Find(lease_id);
  if (lease == nullptr) return LeaseNotCurrent(lease_id);
  lease->completing = false;
  if (!stored.ok() && !absl::IsInvalidArgument(stored.status()) &&
      !absl::IsFailedPrecondition(stored.status())) {
    // The store could not write now (busy, full): the lease stays; the worker retries.
    lease->deadline = absl::Now() + options_.lease_timeout;
    return absl::UnavailableError(
        absl::StrCat("step ", step, " not stored yet (retry): ", stored.status().message()));
  }
  if (!stored.ok()) {
    const std::string error =
        absl::StrCat("upload of step ", step, " refused: ", stored.status().message());
    EndLease(lease_id, StepState::kFailed, error);
    return absl::Status(stored.status().code(), error);
  }
  const StepKey key = leases_.Remove(lease_id).key;
  ActiveJob* job = active_.at(key.first).get();
  const storage::JobCheckpoint& finished = stored->checkpoint;
  job->record.checkpoints[key.second] = finished;
  if (finished.duplicate_of >= 0) WarnDuplicate(key.first, finished);
  job->record.updated_at = stored->updated_at;
  spdlog::info("job {} step {} {} in {:.2f} s by {}", key.first, finished.step,
               storage::StepStateName(finished.state), finished.seconds, finished.worker);
  PublishStep(job, key.second, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
  MaybeFinish(key.first);
  return absl::OkStatus();
}

bool JobRegistry::ExpireLeases(absl::Time now) {
  bool pending = false;
  for (const std::string& id : leases_.Expired(now)) {
    const LeaseEntry& lease = *leases_.Find(id);
    const std::string& worker = Checkpoint(lease.key).worker;
    const std::string timeout = absl::FormatDuration(options_.lease_timeout);
    pending |= RetryOrFail(
        id, lease.local ? absl::StrCat("lease expired: embedded worker '", worker,
                                       "' neither delivered the step nor sent a heartbeat for ",
                                       timeout,
                                       " (its result could not be sent; see the server's log)")
                        : absl::StrCat("lease expired: worker '", worker,
                                       "' sent no heartbeat for ", timeout));
  }
  return pending;
}

const std::string& JobRegistry::WorkerOf(const LeaseEntry& lease) const {
  return active_.at(lease.key.first)->record.checkpoints[lease.key.second].worker;
}

std::set<std::string> JobRegistry::LeaseWorkers() const {
  std::set<std::string> workers;
  for (const auto& [lease_id, lease] : leases_.entries()) {
    workers.insert(WorkerOf(lease));
  }
  return workers;
}

std::set<std::string> JobRegistry::LocalWorkersOf(int64_t job_id) const {
  std::set<std::string> workers;
  for (const std::string& lease_id : leases_.IdleLeasesOf(job_id)) {
    const LeaseEntry& lease = leases_.entries().at(lease_id);
    if (lease.local) workers.insert(WorkerOf(lease));
  }
  return workers;
}

std::vector<std::pair<std::string, std::string>> JobRegistry::LocalLeasesOf(
    const std::string& worker) const {
  std::vector<std::pair<std::string, std::string>> leases;
  for (const auto& [lease_id, lease] : leases_.entries()) {
    if (lease.local && !lease.busy() && WorkerOf(lease) == worker) {
      leases.emplace_back(lease_id, lease.holder);
    }
  }
  return leases;
}

// ---- Store and events ------------------------------------------------------------------

absl::Status JobRegistry::SaveCheckpoint(ActiveJob* job, size_t index) {
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

void JobRegistry::SaveJobState(ActiveJob* job) {
  absl::StatusOr<std::string> updated_at =
      store_->SetJobState(job->record.id, job->record.state, job->record.error);
  if (!updated_at.ok()) {
    spdlog::error("job {}: storing job state failed: {}", job->record.id,
                  updated_at.status().ToString());
    return;
  }
  job->record.updated_at = *std::move(updated_at);
}

void JobRegistry::PublishStep(ActiveJob* job, size_t index, int kind, int done, int total) {
  if (events_->NumWatchers(job->record.id) == 0) return;
  pb::JobEvent event;
  event.set_kind(static_cast<pb::JobEvent::Kind>(kind));
  ToProto(job->record, event.mutable_job());
  ToProto(job->record.checkpoints[index], event.mutable_checkpoint());
  event.set_batches_done(done);
  event.set_batches_total(total);
  events_->Publish(job->record.id, event);
}

void JobRegistry::PublishFetching(const LeaseEntry* lease, const pb::FetchProgress& fetch) {
  ActiveJob* job = active_.at(lease->key.first).get();
  // Kept for the job's snapshots (the dashboard polls them), never stored.
  job->record.checkpoints[lease->key.second].fetch = storage::StepFetchProgress{
      std::max<int64_t>(fetch.bytes_done(), 0), std::max<int64_t>(fetch.bytes_total(), 0),
      std::isfinite(fetch.bytes_per_second()) ? std::max(fetch.bytes_per_second(), 0.0) : 0.0,
      std::max<int64_t>(fetch.cache_bytes(), 0)};
  if (events_->NumWatchers(job->record.id) == 0) return;
  pb::JobEvent event;
  event.set_kind(pb::JobEvent::KIND_STEP_FETCHING);
  ToProto(job->record, event.mutable_job());
  ToProto(job->record.checkpoints[lease->key.second], event.mutable_checkpoint());
  *event.mutable_fetch() = fetch;
  events_->Publish(job->record.id, event);
}

void JobRegistry::MaybeFinish(int64_t job_id) {
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
  events_->Publish(job_id, event);
  active_.erase(it);
}

}  // namespace anisoscope::server
