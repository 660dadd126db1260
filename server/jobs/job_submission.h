// JobSubmission: a submit, whatever the transport calls it (the gRPC JobService today): the
// probe's size checked before any file is opened, the caller's namespace's file gate built
// once, the spec read through it (the checkpoints found, or a remote source listed), the probe
// read through it, then the runner, which stores the job with its probe and its allowed roots. The transport maps the
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
#include "server/sources/source_lister.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class JobSubmission {
 public:
  // None owned; each must outlive the submission. `server_files`: the server's roots;
  // `sources`: the server's remote sources (null: a source is refused, FAILED_PRECONDITION).
  JobSubmission(JobRunner* runner, storage::MetricsStore* store, const FileGate* server_files,
                const RequestLimits& limits, const SourceLister* sources = nullptr)
      : runner_(runner),
        store_(store),
        server_files_(server_files),
        limits_(limits),
        sources_(sources) {}

  // Stores and queues `request` as a job of namespace `ns`, submitted by `actor`.
  // RESOURCE_EXHAUSTED naming --max-probe-tokens for a probe past the limits;
  // PERMISSION_DENIED for a namespace with no usable root or a path outside its roots;
  // INVALID_ARGUMENT for a bad spec or probe file; UNAVAILABLE while draining. A source
  // (request.source) is checked against the server's --allow-source and the namespace's
  // sources (PERMISSION_DENIED naming the source and the list) and listed by the server, never
  // downloaded (server/jobs/source_steps.h says what each listed step becomes);
  // INVALID_ARGUMENT naming the source when it lists no step (unless followed); the listing's
  // errors pass through, naming the repo or bucket.
  absl::StatusOr<storage::JobRecord> Submit(const ::anisoscope::v1::SubmitJobRequest& request,
                                            const std::string& ns, const std::string& actor) const;

 private:
  // Lists spec->source (checked for `ns`) into spec->checkpoints.
  absl::Status ListSourceSteps(const ::anisoscope::v1::SubmitJobRequest& request,
                               const std::string& ns, storage::JobSpec* spec) const;

  JobRunner* const runner_;
  storage::MetricsStore* const store_;
  const FileGate* const server_files_;
  const RequestLimits limits_;
  const SourceLister* const sources_;
};

// The store's unfinished jobs with their inputs, for JobRunner::Create: the probe stored at
// submit (a job stored before probes were reads its probe file again, through its namespace's
// gate, bounded by `max_probe_tokens`) and the namespace's roots now (none when it has no
// usable root: its units are then refused by the workers). A job whose probe cannot be had
// is marked failed in the store, naming why, and left out. So is a job of a remote source
// that `sources` (when not null) refuses now, as a submit would (SourceLister::Check with
// the namespace's sources: e.g. an operator removed its --allow-source): its steps are never
// leased. Blocks on SQLite and file I/O.
absl::StatusOr<std::vector<JobRunner::ResumedJob>> LoadUnfinishedJobs(
    storage::MetricsStore& store, const FileGate& server_files, int64_t max_probe_tokens,
    const SourceLister* sources = nullptr);

}  // namespace anisoscope::server
