#include "server/jobs/checkpoint_follower.h"

#include <spdlog/spdlog.h>

#include "common/status_macros.h"
#include "server/jobs/job_request.h"

namespace anisoscope::server {

CheckpointFollower::CheckpointFollower(JobRunner* runner, storage::MetricsStore* store,
                                       const FileGate* server_files, absl::Duration interval)
    : runner_(runner),
      store_(store),
      server_files_(server_files),
      interval_(interval),
      thread_([this] { Loop(); }) {}

CheckpointFollower::~CheckpointFollower() { Stop(); }

void CheckpointFollower::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void CheckpointFollower::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) PollOnce();
}

absl::Status CheckpointFollower::Follow(const JobRunner::FollowedJob& job) {
  ASSIGN_OR_RETURN(const FileGate files, GateForNamespace(*store_, *server_files_, job.ns));
  ASSIGN_OR_RETURN(std::vector<storage::CheckpointSpec> found,
                   NewWholeCheckpoints(job.dir, job.known_steps, job.until_step, files));
  if (found.empty()) return absl::OkStatus();
  return runner_->AddFollowedCheckpoints(job.id, std::move(found));
}

void CheckpointFollower::PollOnce() {
  for (const JobRunner::FollowedJob& job : runner_->FollowedJobs()) {
    const absl::Status status = Follow(job);
    if (!status.ok() && !absl::IsFailedPrecondition(status)) {
      spdlog::warn("job {}: following {}: {} (trying again in {})", job.id, job.dir,
                   std::string(status.message()), absl::FormatDuration(interval_));
    }
  }
}

}  // namespace anisoscope::server
