#include "server/jobs/checkpoint_follower.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/jobs/job_request.h"
#include "server/jobs/source_steps.h"

namespace anisoscope::server {

CheckpointFollower::CheckpointFollower(JobRunner* runner, storage::MetricsStore* store,
                                       const FileGate* server_files, absl::Duration interval,
                                       const SourceLister* sources,
                                       absl::Duration remote_interval)
    : runner_(runner),
      store_(store),
      server_files_(server_files),
      interval_(interval),
      sources_(sources),
      remote_interval_(remote_interval),
      thread_([this] { Loop(); }) {}

CheckpointFollower::~CheckpointFollower() { Stop(); }

void CheckpointFollower::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void CheckpointFollower::Loop() {
  absl::Time last_remote = absl::InfinitePast();
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    const absl::Time now = absl::Now();
    const bool remote = now - last_remote >= remote_interval_;
    if (remote) last_remote = now;
    Poll(remote);
  }
}

absl::Status CheckpointFollower::FollowSource(const JobRunner::FollowedJob& job) {
  if (sources_ == nullptr) {
    return absl::FailedPreconditionError("this server reads no remote source");
  }
  ::anisoscope::v1::CheckpointSource source;
  if (!source.ParseFromString(job.source)) {
    return absl::DataLossError("the source stored with the job is damaged");
  }
  // Checked as ListAllowedSource checks; the steps the job has are not listed again.
  ASSIGN_OR_RETURN(const SourceAllowList own, NamespaceSources(*store_, job.ns));
  const absl::Status allowed = sources_->Check(source, own);
  if (absl::IsPermissionDenied(allowed)) {
    // The allow-lists refuse it now (not the listing: S3 answers a bad key with 403 too).
    EndRefused(job, allowed);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(allowed);
  ASSIGN_OR_RETURN(const listing::SourceListing listing, sources_->List(source, job.known_steps));
  std::vector<storage::CheckpointSpec> found = CheckpointsFromListing(
      listing, source, job.dedupe, /*follow=*/true, job.known_steps, job.until_step);
  if (found.empty()) return absl::OkStatus();
  return runner_->AddFollowedCheckpoints(job.id, std::move(found));
}

absl::Status CheckpointFollower::Follow(const JobRunner::FollowedJob& job) {
  if (!job.source.empty()) return FollowSource(job);
  ASSIGN_OR_RETURN(const FileGate files, GateForNamespace(*store_, *server_files_, job.ns));
  ASSIGN_OR_RETURN(std::vector<storage::CheckpointSpec> found,
                   NewWholeCheckpoints(job.dir, job.known_steps, job.until_step, files));
  if (found.empty()) return absl::OkStatus();
  return runner_->AddFollowedCheckpoints(job.id, std::move(found));
}

void CheckpointFollower::EndRefused(const JobRunner::FollowedJob& job,
                                    const absl::Status& reason) {
  spdlog::error("job {}: following {}: {}; the source is no longer allowed, so the job ends",
                job.id, job.dir, std::string(reason.message()));
  const absl::StatusOr<storage::JobRecord> ended = runner_->Cancel(
      job.id, absl::StrCat("the server (source refused: ", reason.message(), ")"));
  if (!ended.ok()) {
    spdlog::warn("job {}: ending it: {}", job.id, std::string(ended.status().message()));
  }
}

void CheckpointFollower::Poll(bool remote) {
  for (const JobRunner::FollowedJob& job : runner_->FollowedJobs()) {
    if (!job.source.empty() && !remote) continue;
    const absl::Status status = Follow(job);
    if (!status.ok() && !absl::IsFailedPrecondition(status)) {
      const absl::Duration next =
          job.source.empty() ? interval_ : std::max(interval_, remote_interval_);
      spdlog::warn("job {}: following {}: {} (trying again in {})", job.id, job.dir,
                   std::string(status.message()), absl::FormatDuration(next));
    }
  }
}

}  // namespace anisoscope::server
