// WorkClient: a worker's side of anisoscope.v1.WorkerService, over one stub.
//
// Each call carries a deadline; transient failures (UNAVAILABLE: the server restarting or
// unreachable) are retried with capped exponential backoff and jitter until the call's
// patience runs out or Stop is called, so that workers ride out a server restart. Errors
// come back as absl::Status. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"

namespace anisoscope::worker {

class WorkClient {
 public:
  // Metadata sent with every call (key, value).
  using Metadata = std::vector<std::pair<std::string, std::string>>;

  // `stub` is not owned and outlives the client.
  WorkClient(::anisoscope::v1::WorkerService::StubInterface* stub, Metadata metadata)
      : stub_(stub), metadata_(std::move(metadata)) {}

  // Long poll for a unit: one attempt (no retry: the caller's loop backs off itself).
  absl::StatusOr<::anisoscope::v1::LeaseWorkResponse> Lease(
      const ::anisoscope::v1::LeaseWorkRequest& request);
  // Retried for up to `patience` while the server is unreachable.
  absl::StatusOr<::anisoscope::v1::HeartbeatResponse> Heartbeat(
      const ::anisoscope::v1::HeartbeatRequest& request, absl::Duration patience);
  absl::StatusOr<::anisoscope::v1::CompleteWorkResponse> Complete(
      const ::anisoscope::v1::CompleteWorkRequest& request, absl::Duration patience);
  absl::Status Fail(const ::anisoscope::v1::FailWorkRequest& request, absl::Duration patience);

  // Cancels a Lease in flight and ends retries' waiting early. Idempotent.
  void Stop();
  bool stopped() const { return stop_.HasBeenNotified(); }
  // Waits `duration` or until Stop; false when stopped.
  bool Sleep(absl::Duration duration) const;
  // Sets the deadline and the metadata of one call.
  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const;

 private:
  ::anisoscope::v1::WorkerService::StubInterface* const stub_;
  const Metadata metadata_;
  absl::Notification stop_;
  absl::Mutex mu_;
  grpc::ClientContext* lease_context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// Backoff before retry number `attempt` (0-based): 200 ms doubling to 10 s, with jitter.
absl::Duration Backoff(int attempt);

}  // namespace anisoscope::worker
