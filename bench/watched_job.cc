#include "bench/watched_job.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

namespace anisoscope {

namespace pb = ::anisoscope::v1;

absl::StatusOr<WatchedJob> SubmitAndWatch(pb::JobService::StubInterface* jobs,
                                          const pb::SubmitJobRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const auto since_start = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  WatchedJob watched;
  {
    grpc::ClientContext context;
    const grpc::Status status = jobs->SubmitJob(&context, request, &watched.job);
    if (!status.ok()) return absl::UnavailableError("submit: " + status.error_message());
  }
  pb::WatchJobRequest watch;
  watch.set_id(watched.job.id());
  grpc::ClientContext context;
  auto reader = jobs->WatchJob(&context, watch);
  pb::JobEvent event;
  while (reader->Read(&event)) {
    if (event.kind() == pb::JobEvent::KIND_STEP_FINISHED && watched.first_step_seconds == 0) {
      watched.first_step_seconds = since_start();
    }
    if (event.kind() == pb::JobEvent::KIND_JOB_FINISHED) watched.job = event.job();
  }
  watched.seconds = since_start();
  return watched;
}

}  // namespace anisoscope
