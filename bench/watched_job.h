// A job submitted and watched to its end, as the benchmarks time it: one home for the
// submit-then-watch of lease_bench and worker_boundary_bench.
#pragma once

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"

namespace anisoscope {

struct WatchedJob {
  ::anisoscope::v1::Job job;      // as it finished
  double seconds = 0;             // from submit to the end of the job's events
  double first_step_seconds = 0;  // from submit to the first STEP_FINISHED (0: none)
};

// Submits `request` and reads the job's events until the stream ends; the submit's error
// when it fails.
absl::StatusOr<WatchedJob> SubmitAndWatch(::anisoscope::v1::JobService::StubInterface* jobs,
                                          const ::anisoscope::v1::SubmitJobRequest& request);

}  // namespace anisoscope
