#include "worker/work_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace anisoscope::worker {
namespace {

namespace pb = ::anisoscope::v1;

constexpr absl::Duration kCallDeadline = absl::Seconds(120);

}  // namespace

absl::Duration Backoff(int attempt) {
  thread_local std::mt19937 engine(std::random_device{}());
  const double base = std::min(10.0, 0.2 * std::pow(2.0, std::min(attempt, 6)));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return absl::Seconds(base * jitter(engine));
}

void WorkClient::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  for (const auto& [key, value] : metadata_) context->AddMetadata(key, value);
}

absl::StatusOr<pb::LeaseWorkResponse> WorkClient::Lease(const pb::LeaseWorkRequest& request) {
  grpc::ClientContext context;
  Prepare(&context, absl::Milliseconds(request.wait_ms()) + absl::Seconds(30));
  {
    absl::MutexLock lock(&mu_);
    if (stopped()) return absl::CancelledError("worker stopping");
    lease_context_ = &context;
  }
  pb::LeaseWorkResponse response;
  const grpc::Status status = stub_->LeaseWork(&context, request, &response);
  {
    absl::MutexLock lock(&mu_);
    lease_context_ = nullptr;
  }
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

namespace {

// Calls `call` until it succeeds, fails for good, `patience` runs out or `client` stops.
template <typename Response, typename Call>
absl::StatusOr<Response> Retried(const WorkClient& client, const char* what,
                                 absl::Duration patience, Call call) {
  const absl::Time give_up = absl::Now() + patience;
  // A call never outlives the caller's patience by much (a heartbeat's is one interval).
  const absl::Duration call_deadline = std::min(kCallDeadline, std::max(patience, absl::Seconds(2)));
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext context;
    client.Prepare(&context, call_deadline);
    Response response;
    const grpc::Status status = call(&context, &response);
    if (status.ok()) return response;
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    const absl::Duration wait = Backoff(attempt);
    if (!transient || absl::Now() + wait > give_up) return FromGrpcStatus(status);
    spdlog::warn("{}: server unreachable ({}); retrying in {}", what, status.error_message(),
                 absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1))));
    if (!client.Sleep(wait)) return FromGrpcStatus(status);
  }
}

}  // namespace

absl::StatusOr<pb::HeartbeatResponse> WorkClient::Heartbeat(const pb::HeartbeatRequest& request,
                                                            absl::Duration patience) {
  return Retried<pb::HeartbeatResponse>(
      *this, "heartbeat", patience, [&](grpc::ClientContext* context, auto* response) {
        return stub_->Heartbeat(context, request, response);
      });
}

absl::StatusOr<pb::CompleteWorkResponse> WorkClient::Complete(
    const pb::CompleteWorkRequest& request, absl::Duration patience) {
  return Retried<pb::CompleteWorkResponse>(
      *this, "upload", patience, [&](grpc::ClientContext* context, auto* response) {
        return stub_->CompleteWork(context, request, response);
      });
}

absl::Status WorkClient::Fail(const pb::FailWorkRequest& request, absl::Duration patience) {
  return Retried<pb::FailWorkResponse>(*this, "failure report", patience,
                                       [&](grpc::ClientContext* context, auto* response) {
                                         return stub_->FailWork(context, request, response);
                                       })
      .status();
}

void WorkClient::Stop() {
  absl::MutexLock lock(&mu_);
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (lease_context_ != nullptr) lease_context_->TryCancel();
}

bool WorkClient::Sleep(absl::Duration duration) const {
  return !stop_.WaitForNotificationWithTimeout(duration);
}

}  // namespace anisoscope::worker
