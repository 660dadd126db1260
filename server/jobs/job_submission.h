// JobSubmission: a submit, whatever the transport calls it (the gRPC JobService today): the
// probe's size checked before any file is opened, the caller's namespace's file gate built
// once, the spec read through it (the checkpoints found), the probe read through it, then the
// runner, which stores the job with its probe and its allowed roots. The transport maps the
// Status. And the same inputs for the jobs a restarted server resumes.
//
// Thread-safe; Submit blocks on file-system and SQLite I/O, never under the runner's lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/file_gate.h"
#include "server/jobs/job_runner.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class JobSubmission {
 public:
  // None owned; each must outlive the submission. `server_files`: the server's roots.
  JobSubmission(JobRunner* runner, storage::MetricsStore* store, const FileGate* server_files,
                const RequestLimits& limits)
      : runner_(runner), store_(store), server_files_(server_files), limits_(limits) {}

  // Stores and queues `request` as a job of namespace `ns`, submitted by `actor`.
  // RESOURCE_EXHAUSTED naming --max-probe-tokens for a probe past the limits;
  // PERMISSION_DENIED for a namespace with no usable root or a path outside its roots;
  // INVALID_ARGUMENT for a bad spec or probe file; UNAVAILABLE while draining.
  absl::StatusOr<storage::JobRecord> Submit(const ::anisoscope::v1::SubmitJobRequest& request,
                                            const std::string& ns, const std::string& actor) const;

 private:
  JobRunner* const runner_;
  storage::MetricsStore* const store_;
  const FileGate* const server_files_;
  const RequestLimits limits_;
};

// The store's unfinished jobs with their inputs, for JobRunner::Create: the probe stored at
// submit (a job stored before probes were reads its probe file again, through its namespace's
// gate, bounded by `max_probe_tokens`) and the namespace's roots now (none when it has no
// usable root: its units are then refused by the workers). A job whose probe cannot be had
// is marked failed in the store, naming why, and left out. Blocks on SQLite and file I/O.
absl::StatusOr<std::vector<JobRunner::ResumedJob>> LoadUnfinishedJobs(
    storage::MetricsStore& store, const FileGate& server_files, int64_t max_probe_tokens);

}  // namespace anisoscope::server
