#include "worker/lease_keeper.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace anisoscope::worker {
namespace pb = ::anisoscope::v1;

LeaseKeeper::LeaseKeeper(WorkClient* client, const pb::WorkUnit& unit)
    : client_(client),
      lease_id_(unit.lease_id()),
      interval_(absl::Milliseconds(std::max(100, unit.heartbeat_interval_ms()))) {
  thread_ = std::thread(&LeaseKeeper::Loop, this);
}

LeaseKeeper::~LeaseKeeper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool LeaseKeeper::ReportProbe(const std::string& probe_id) { return Report(&probe_id_, probe_id); }

bool LeaseKeeper::ReportFingerprint(const std::string& fingerprint) {
  return Report(&fingerprint_, fingerprint);
}

bool LeaseKeeper::Report(std::string* field, const std::string& value) {
  {
    absl::MutexLock lock(&mu_);
    *field = value;
  }
  Beat();
  return !ended();
}

void LeaseKeeper::SetProgress(int done, int total) {
  absl::MutexLock lock(&mu_);
  done_ = done;
  total_ = total;
  progress_unsent_ = true;
}

void LeaseKeeper::SetFetch(const pb::FetchProgress& fetch) {
  absl::MutexLock lock(&mu_);
  fetch_ = fetch;
  fetching_ = true;
  progress_unsent_ = true;
}

void LeaseKeeper::ClearFetch() {
  absl::MutexLock lock(&mu_);
  fetching_ = false;
}

void LeaseKeeper::FlushProgress() {
  absl::MutexLock beat_lock(&beat_mu_);
  bool unsent = false;
  {
    absl::MutexLock lock(&mu_);
    unsent = progress_unsent_ && !ended_;
  }
  if (unsent) BeatLocked();
}

bool LeaseKeeper::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

std::string LeaseKeeper::why() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

void LeaseKeeper::Loop() {
  absl::MutexLock lock(&mu_);
  auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || ended_ || progress_unsent_;
  };
  while (true) {
    mu_.AwaitWithTimeout(absl::Condition(&wake), interval_);
    if (stopping_ || ended_) return;
    mu_.Unlock();
    Beat();
    mu_.Lock();
  }
}

void LeaseKeeper::Beat() {
  absl::MutexLock beat_lock(&beat_mu_);
  BeatLocked();
}

void LeaseKeeper::BeatLocked() {
  pb::HeartbeatRequest request;
  request.set_lease_id(lease_id_);
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    request.set_probe_id(probe_id_);
    request.set_fingerprint(fingerprint_);
    request.set_batches_done(done_);
    request.set_batches_total(total_);
    if (fetching_) *request.mutable_fetch() = fetch_;
    progress_unsent_ = false;
  }
  absl::StatusOr<pb::HeartbeatResponse> response = client_->Heartbeat(request, interval_);
  absl::MutexLock lock(&mu_);
  if (!response.ok()) {
    if (absl::IsFailedPrecondition(response.status())) {
      ended_ = true;
      why_ = std::string(response.status().message());
    } else {
      spdlog::warn("heartbeat of lease {} failed: {}", lease_id_, response.status().ToString());
    }
    return;
  }
  if (response->verdict() == pb::HeartbeatResponse::VERDICT_CANCELLED) {
    ended_ = true;
    why_ = "the job was cancelled";
  } else if (response->verdict() == pb::HeartbeatResponse::VERDICT_ALREADY_STORED) {
    ended_ = true;
    why_ = "the step is already stored for this probe (skipped)";
  } else if (response->verdict() == pb::HeartbeatResponse::VERDICT_DUPLICATE) {
    ended_ = true;
    why_ = "an earlier stored step of the run has the same weights (skipped, dedupe)";
  }
}

}  // namespace anisoscope::worker
