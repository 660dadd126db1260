#include "server/jobs/job_submission.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/jobs/job_request.h"
#include "server/jobs/probe_bounds.h"
#include "server/jobs/source_steps.h"
#include "server/jobs/unit_probe.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::Status JobSubmission::ListSourceSteps(const pb::SubmitJobRequest& request,
                                            const std::string& ns, storage::JobSpec* spec) const {
  const pb::CheckpointSource& source = request.source();
  if (sources_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "source ", SourceLister::Describe(source), ": this server reads no remote source"));
  }
  ASSIGN_OR_RETURN(const listing::SourceListing listing,
                   ListAllowedSource(*sources_, *store_, ns, source));
  const bool follow = !spec->follow_dir.empty();
  spec->checkpoints =
      CheckpointsFromListing(listing, source, spec->dedupe, follow, {}, spec->until_step);
  if (spec->checkpoints.empty() && !follow) {
    return absl::InvalidArgumentError(absl::StrCat(
        "source ", absl::CHexEscape(SourceLister::Describe(source)), " lists no step (",
        listing.without_step.size(), " names without a step, ", listing.problems.size(),
        " unusable)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::JobRecord> JobSubmission::Submit(const pb::SubmitJobRequest& request,
                                                         const std::string& ns,
                                                         const std::string& actor) const {
  if (runner_->draining()) {
    return absl::UnavailableError("server is shutting down; not accepting jobs");
  }
  // The probe's size, before any file is opened; the token file's read is bounded below.
  RETURN_IF_ERROR(CheckProbeRequest(request.probe(), limits_));
  ASSIGN_OR_RETURN(const FileGate files, GateForNamespace(*store_, *server_files_, ns));
  ASSIGN_OR_RETURN(storage::JobSpec spec, JobSpecFromRequest(request, files));
  spec.ns = ns;
  if (!spec.source.empty()) RETURN_IF_ERROR(ListSourceSteps(request, ns, &spec));
  JobRunner::JobInputs inputs;
  ASSIGN_OR_RETURN(inputs.probe, UnitProbeFromSpec(spec, files, limits_.max_probe_tokens));
  inputs.roots = files.roots();
  return runner_->Submit(spec, std::move(inputs), actor);
}

namespace {

// Job `record`'s probe: as stored at submit, else (a job stored before schema 8) read again
// from its file through `files`.
absl::StatusOr<pb::UnitProbe> ResumedProbe(storage::MetricsStore& store,
                                           const storage::JobRecord& record, const FileGate& files,
                                           int64_t max_probe_tokens) {
  ASSIGN_OR_RETURN(const std::optional<std::string> stored, store.JobProbe(record.id));
  if (!stored.has_value()) return UnitProbeFromSpec(record.spec, files, max_probe_tokens);
  pb::UnitProbe probe;
  if (!probe.ParseFromString(*stored)) {
    return absl::DataLossError(absl::StrCat("the probe stored with job ", record.id,
                                            " is damaged; submit the job again"));
  }
  return probe;
}

// OK when job `record` reads no remote source, or `sources` allows its source now.
absl::Status CheckResumedSource(storage::MetricsStore& store, const storage::JobRecord& record,
                                const SourceLister& sources) {
  if (record.spec.source.empty()) return absl::OkStatus();
  pb::CheckpointSource source;
  if (!source.ParseFromString(record.spec.source)) {
    return absl::DataLossError(absl::StrCat("the source stored with job ", record.id,
                                            " is damaged; submit the job again"));
  }
  ASSIGN_OR_RETURN(const SourceAllowList own, NamespaceSources(store, record.spec.ns));
  return sources.Check(source, own);
}

}  // namespace

absl::StatusOr<std::vector<JobRunner::ResumedJob>> LoadUnfinishedJobs(
    storage::MetricsStore& store, const FileGate& server_files, int64_t max_probe_tokens,
    const SourceLister* sources) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids, store.UnfinishedJobs());
  std::vector<JobRunner::ResumedJob> resumed;
  for (int64_t id : ids) {
    ASSIGN_OR_RETURN(storage::JobRecord record, store.GetJob(id));
    absl::StatusOr<FileGate> files = GateForNamespace(store, server_files, record.spec.ns);
    // No usable root: nothing opens, and the units carry none.
    if (!files.ok()) files = FileGate::Beneath({});
    RETURN_IF_ERROR(files.status());
    absl::StatusOr<pb::UnitProbe> probe =
        ResumedProbe(store, record, *files, max_probe_tokens);
    if (probe.ok() && sources != nullptr) {
      if (absl::Status allowed = CheckResumedSource(store, record, *sources); !allowed.ok()) {
        probe = absl::Status(allowed.code(),
                             absl::StrCat(allowed.message(), " (checked again at restart)"));
      }
    }
    if (!probe.ok()) {
      spdlog::error("job {} cannot resume: {}", id, probe.status().ToString());
      RETURN_IF_ERROR(
          store.SetJobState(id, storage::JobState::kFailed, std::string(probe.status().message()))
              .status());
      continue;
    }
    JobRunner::ResumedJob& job = resumed.emplace_back();
    job.record = std::move(record);
    job.inputs.probe = *std::move(probe);
    job.inputs.roots = files->roots();
  }
  return resumed;
}

}  // namespace anisoscope::server
