#include "server/job_runner.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/proto_convert.h"

namespace anisoscope::server {
namespace {

namespace fs = std::filesystem;
using storage::JobState;
using storage::StepState;

bool IsFinal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

std::string NowIso8601() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
}

// Total size of the regular files under `dir` (symlinks followed, e.g. HF cache blobs).
int64_t DirectoryBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code file_error;
    if (fs::is_regular_file(it->path(), file_error)) {
      const uintmax_t size = fs::file_size(it->path(), file_error);
      if (!file_error) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

}  // namespace

struct JobRunner::ActiveJob {
  storage::JobRecord record;
  analysis::ProbeSpec probe;
  bool cancel_requested = false;
};

struct JobRunner::StepOutcome {
  StepState state = StepState::kFailed;
  std::string error;
  std::string probe_id;
  int64_t size_bytes = 0;
  double seconds = 0;
};

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(const Options& options,
                                                             storage::MetricsStore* store) {
  if (options.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workers must be >= 1, got ", options.workers));
  }
  if (!options.extractor_factory) {
    return absl::InvalidArgumentError("an extractor factory is required");
  }
  if (store == nullptr) return absl::InvalidArgumentError("a metrics store is required");
  std::unique_ptr<JobRunner> runner(new JobRunner(store));
  for (int i = 0; i < options.workers; ++i) {
    absl::StatusOr<std::unique_ptr<analysis::Extractor>> extractor = options.extractor_factory();
    if (!extractor.ok()) return extractor.status();
    if (*extractor == nullptr) return absl::InternalError("extractor factory returned null");
    runner->extractors_.push_back(std::move(extractor).value());
  }
  if (absl::Status status = runner->Resume(); !status.ok()) return status;
  for (auto& extractor : runner->extractors_) {
    runner->threads_.emplace_back(&JobRunner::WorkerLoop, runner.get(), extractor.get());
  }
  return runner;
}

JobRunner::JobRunner(storage::MetricsStore* store) : store_(store) {}

JobRunner::~JobRunner() { Drain(); }

absl::Status JobRunner::Resume() {
  absl::StatusOr<std::vector<int64_t>> ids = store_->UnfinishedJobs();
  if (!ids.ok()) return ids.status();
  absl::MutexLock lock(&mu_);
  for (int64_t id : *ids) {
    absl::StatusOr<storage::JobRecord> record = store_->GetJob(id);
    if (!record.ok()) return record.status();
    absl::StatusOr<analysis::ProbeSpec> probe = ToAnalysisProbeSpec(record->spec);
    if (!probe.ok()) {
      spdlog::error("job {} cannot resume: {}", id, probe.status().ToString());
      if (absl::Status s =
              store_->SetJobState(id, JobState::kFailed, std::string(probe.status().message()));
          !s.ok()) {
        return s;
      }
      continue;
    }
    int left = 0;
    for (storage::JobCheckpoint& checkpoint : record->checkpoints) {
      if (checkpoint.state == StepState::kRunning) {
        checkpoint.state = StepState::kPending;
        if (absl::Status s = store_->UpdateCheckpoint(id, checkpoint); !s.ok()) return s;
      }
      if (checkpoint.state == StepState::kPending) ++left;
    }
    spdlog::info("resuming job {} (run {}): {} of {} checkpoints left", id, record->spec.run, left,
                 record->checkpoints.size());
    AddJob(std::move(record).value(), std::move(probe).value());
  }
  return absl::OkStatus();
}

void JobRunner::AddJob(storage::JobRecord record, analysis::ProbeSpec probe) {
  const int64_t id = record.id;
  auto job = std::make_unique<ActiveJob>();
  job->record = std::move(record);
  job->probe = std::move(probe);
  for (size_t i = 0; i < job->record.checkpoints.size(); ++i) {
    if (job->record.checkpoints[i].state == StepState::kPending) queue_.push_back({id, i});
  }
  active_[id] = std::move(job);
  MaybeFinish(id);
}

absl::StatusOr<storage::JobRecord> JobRunner::Submit(const storage::JobSpec& spec) {
  if (draining()) return absl::UnavailableError("server is shutting down; not accepting jobs");
  absl::StatusOr<analysis::ProbeSpec> probe = ToAnalysisProbeSpec(spec);
  if (!probe.ok()) return probe.status();
  if (spec.checkpoints.empty()) return absl::InvalidArgumentError("the job has no checkpoints");
  absl::StatusOr<int64_t> id = store_->CreateJob(spec);
  if (!id.ok()) return id.status();
  absl::StatusOr<storage::JobRecord> record = store_->GetJob(*id);
  if (!record.ok()) return record.status();
  spdlog::info("job {} submitted: run {}, {} checkpoints{}", *id, spec.run, spec.checkpoints.size(),
               spec.force ? ", force" : "");
  absl::MutexLock lock(&mu_);
  storage::JobRecord copy = *record;
  AddJob(std::move(record).value(), std::move(probe).value());
  return copy;
}

absl::StatusOr<storage::JobRecord> JobRunner::Cancel(int64_t id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it != active_.end() && !it->second->cancel_requested) {
      ActiveJob* job = it->second.get();
      job->cancel_requested = true;
      job->record.state = JobState::kCancelled;
      job->record.error.clear();
      SaveJobState(job);
      for (auto q = queue_.begin(); q != queue_.end();) {
        if (q->job_id != id) {
          ++q;
          continue;
        }
        const size_t index = q->index;
        q = queue_.erase(q);
        job->record.checkpoints[index].state = StepState::kCancelled;
        SaveCheckpoint(job, index);
        PublishStep(job, index, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
      }
      spdlog::info("job {} cancelled", id);
      storage::JobRecord copy = job->record;
      MaybeFinish(id);
      return copy;
    }
  }
  absl::StatusOr<storage::JobRecord> record = store_->GetJob(id);
  if (!record.ok()) return record.status();
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", id, " is already ", storage::JobStateName(record->state), "; nothing to cancel"));
}

absl::StatusOr<storage::JobRecord> JobRunner::Get(int64_t id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(id);
    if (it != active_.end()) return it->second->record;
  }
  return store_->GetJob(id);
}

absl::StatusOr<std::vector<storage::JobRecord>> JobRunner::List(int limit, const std::string& run) {
  return store_->ListJobs(limit, run);
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
  absl::StatusOr<storage::JobRecord> record = store_->GetJob(id);
  if (!record.ok()) return record.status();
  ToProto(*record, snapshot.mutable_job());
  watcher->OnEvent(snapshot);
  if (IsFinal(record->state)) {
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

bool JobRunner::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

void JobRunner::Drain() {
  {
    absl::MutexLock lock(&mu_);
    if (!draining_) spdlog::info("job runner draining");
    draining_ = true;
    events_.CloseAll(absl::UnavailableError("server is shutting down"));
  }
  absl::MutexLock join_lock(&join_mu_);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void JobRunner::WorkerLoop(analysis::Extractor* extractor) {
  while (true) {
    WorkItem item;
    ActiveJob* job = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](JobRunner* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->draining_ || !self->queue_.empty();
          },
          this));
      if (draining_) return;
      item = queue_.front();
      queue_.pop_front();
      job = active_.at(item.job_id).get();
      storage::JobCheckpoint& checkpoint = job->record.checkpoints[item.index];
      checkpoint.state = StepState::kRunning;
      checkpoint.error.clear();
      if (job->record.state == JobState::kQueued) {
        job->record.state = JobState::kRunning;
        SaveJobState(job);
      }
      SaveCheckpoint(job, item.index);
      PublishStep(job, item.index, pb::JobEvent::KIND_STEP_STARTED, 0, 0);
    }

    StepOutcome outcome = RunStep(extractor, job, item.index);

    absl::MutexLock lock(&mu_);
    storage::JobCheckpoint& checkpoint = job->record.checkpoints[item.index];
    if (outcome.state == StepState::kCancelled && !job->cancel_requested) {
      outcome.state = StepState::kPending;  // interrupted by the drain: resume on restart
    }
    checkpoint.state = outcome.state;
    checkpoint.error = outcome.error;
    if (!outcome.probe_id.empty()) checkpoint.probe_id = outcome.probe_id;
    if (outcome.size_bytes > 0) checkpoint.size_bytes = outcome.size_bytes;
    checkpoint.seconds = outcome.seconds;
    SaveCheckpoint(job, item.index);
    if (outcome.state == StepState::kFailed) {
      spdlog::warn("job {} step {} failed: {}", item.job_id, checkpoint.step, outcome.error);
    } else {
      spdlog::info("job {} step {} {} in {:.2f} s", item.job_id, checkpoint.step,
                   storage::StepStateName(outcome.state), outcome.seconds);
    }
    if (outcome.state != StepState::kPending) {
      PublishStep(job, item.index, pb::JobEvent::KIND_STEP_FINISHED, 0, 0);
    }
    MaybeFinish(item.job_id);
  }
}

JobRunner::StepOutcome JobRunner::RunStep(analysis::Extractor* extractor, ActiveJob* job,
                                          size_t index) {
  const auto start = std::chrono::steady_clock::now();
  storage::JobSpec spec;
  analysis::ProbeSpec probe_spec;
  storage::JobCheckpoint checkpoint;
  {
    absl::MutexLock lock(&mu_);
    spec = job->record.spec;
    probe_spec = job->probe;
    checkpoint = job->record.checkpoints[index];
  }
  StepOutcome outcome;
  auto fail = [&](const absl::Status& status) {
    outcome.state =
        status.code() == absl::StatusCode::kCancelled ? StepState::kCancelled : StepState::kFailed;
    outcome.error = std::string(status.message());
  };
  const fs::path dir = checkpoint.path;
  try {
    absl::StatusOr<analysis::Probe> probe = extractor->BuildProbe(dir, probe_spec);
    if (!probe.ok()) {
      fail(probe.status());
    } else {
      outcome.probe_id = probe->id;
      outcome.size_bytes = DirectoryBytes(dir);
      bool stored = false;
      if (!spec.force) {
        absl::StatusOr<bool> has = store_->HasStep(spec.run, probe->id, checkpoint.step);
        if (!has.ok()) {
          fail(has.status());
          return outcome;
        }
        stored = *has;
      }
      if (stored) {
        outcome.state = StepState::kSkipped;
      } else {
        analysis::ExtractCallbacks callbacks;
        callbacks.cancelled = [this, job] {
          absl::MutexLock lock(&mu_);
          return draining_ || job->cancel_requested;
        };
        callbacks.progress = [this, job, index](int done, int total) {
          absl::MutexLock lock(&mu_);
          PublishStep(job, index, pb::JobEvent::KIND_STEP_PROGRESS, done, total);
        };
        absl::StatusOr<analysis::CheckpointMetrics> metrics =
            extractor->Extract(dir, *probe, callbacks);
        if (!metrics.ok()) {
          // Only an interruption we asked for counts as cancelled; anything else failed.
          if (metrics.status().code() == absl::StatusCode::kCancelled && !callbacks.cancelled()) {
            outcome.state = StepState::kFailed;
            outcome.error = std::string(metrics.status().message());
          } else {
            fail(metrics.status());
          }
        } else {
          storage::StepResult result = ToStepResult(spec.run, checkpoint.step, checkpoint.path,
                                                    outcome.size_bytes, *probe, *metrics);
          absl::Status written = store_->WriteStep(result, spec.force);
          if (written.ok()) {
            outcome.state = StepState::kDone;
          } else if (absl::IsAlreadyExists(written)) {
            outcome.state = StepState::kSkipped;  // stored meanwhile by another job
          } else {
            fail(written);
            if (outcome.state == StepState::kCancelled) outcome.state = StepState::kFailed;
          }
        }
      }
    }
  } catch (const std::exception& e) {
    outcome.state = StepState::kFailed;
    outcome.error = absl::StrCat("checkpoint '", checkpoint.path, "': ", e.what());
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

void JobRunner::SaveCheckpoint(ActiveJob* job, size_t index) {
  job->record.updated_at = NowIso8601();
  absl::Status status = store_->UpdateCheckpoint(job->record.id, job->record.checkpoints[index]);
  if (!status.ok()) {
    spdlog::error("job {}: storing checkpoint state failed: {}", job->record.id, status.ToString());
  }
}

void JobRunner::SaveJobState(ActiveJob* job) {
  job->record.updated_at = NowIso8601();
  absl::Status status = store_->SetJobState(job->record.id, job->record.state, job->record.error);
  if (!status.ok()) {
    spdlog::error("job {}: storing job state failed: {}", job->record.id, status.ToString());
  }
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
