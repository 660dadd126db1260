#include "server/jobs/source_audit.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/checkpoint/step_discovery.h"
#include "common/status_macros.h"
#include "server/jobs/job_request.h"
#include "server/jobs/source_steps.h"
#include "server/sources/source_description.h"
#include "sources/listing/checkpoint_files.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;
namespace fs = std::filesystem;

namespace {

// A listed remote source as an audit: steps with their files and duplicates, problems.
pb::AuditSourceResponse FromListing(const listing::SourceListing& listing) {
  pb::AuditSourceResponse out;
  const std::map<std::string, int64_t> duplicate_of = ListedDuplicateOf(listing);
  for (const listing::RemoteStep& step : listing.steps) {
    pb::AuditStep* audited = out.add_steps();
    audited->set_step(step.step);
    audited->set_name(step.name);
    audited->set_revision(step.revision);
    audited->set_commit(step.commit);
    int64_t bytes = 0;
    for (const listing::RemoteFile& file : step.files) {
      pb::RemoteFile* f = audited->add_files();
      f->set_path(file.path);
      f->set_size(file.size);
      f->set_sha256(file.sha256);
      f->set_etag(file.etag);
      bytes += static_cast<int64_t>(file.size);
    }
    audited->set_size_bytes(bytes);
    if (auto it = duplicate_of.find(step.name); it != duplicate_of.end()) {
      audited->set_duplicate_of(it->second);
    }
  }
  for (const std::string& name : listing.without_step) out.add_without_step(name);
  for (const listing::ListingProblem& problem : listing.problems) {
    pb::AuditProblem* p = out.add_problems();
    p->set_name(problem.name);
    p->set_step(problem.step);
    p->set_reason(problem.reason);
  }
  out.set_requests(listing.counters.requests);
  return out;
}

// One step folder's checkpoint files (top level, as the loader reads them) with their sizes;
// no byte of them is read. A step without weight files is a problem.
absl::Status AuditFolderStep(const analysis::DiscoveredStep& step, const FileGate& files,
                             pb::AuditSourceResponse* out) {
  const std::string name = step.path.filename().string();
  absl::StatusOr<std::vector<GatedEntry>> entries = files.List(step.path);
  if (!entries.ok()) {
    pb::AuditProblem* problem = out->add_problems();
    problem->set_name(name);
    problem->set_step(step.step);
    problem->set_reason(std::string(entries.status().message()));
    return absl::OkStatus();
  }
  pb::AuditStep audited;
  audited.set_step(step.step);
  audited.set_name(name);
  int64_t bytes = 0;
  bool weights = false;
  for (const GatedEntry& entry : *entries) {
    if (!entry.is_file || !listing::IsCheckpointFile(entry.name)) continue;
    ASSIGN_OR_RETURN(const uint64_t size, files.FileSize(step.path / entry.name));
    pb::RemoteFile* file = audited.add_files();
    file->set_path(entry.name);
    file->set_size(size);
    bytes += static_cast<int64_t>(size);
    weights = weights || listing::IsWeightFile(entry.name);
  }
  audited.set_size_bytes(bytes);
  if (!weights) {
    pb::AuditProblem* problem = out->add_problems();
    problem->set_name(name);
    problem->set_step(step.step);
    problem->set_reason(absl::StrCat(step.path.string(),
                                     ": no weight files (*.safetensors, "
                                     "pytorch_model*.bin)"));
    return absl::OkStatus();
  }
  *out->add_steps() = std::move(audited);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pb::AuditSourceResponse> SourceAudit::Audit(const pb::AuditSourceRequest& request,
                                                           const std::string& ns,
                                                           const std::string& actor) const {
  const absl::Time start = absl::Now();
  const bool has_source = request.has_source() && HasSource(request.source());
  const bool has_dir = !request.checkpoints_dir().empty();
  if (has_source == has_dir) {
    return absl::InvalidArgumentError("give either source or checkpoints_dir (exactly one)");
  }
  pb::AuditSourceResponse out;
  if (has_source) {
    if (lister_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("source ", absl::CHexEscape(DescribeSource(request.source())),
                       ": this server reads no remote source"));
    }
    ASSIGN_OR_RETURN(const listing::SourceListing listing,
                     ListAllowedSource(*lister_, *store_, ns, request.source()));
    out = FromListing(listing);
    out.set_source(DescribeSource(request.source()));
  } else {
    ASSIGN_OR_RETURN(const FileGate files, GateForNamespace(*store_, *server_files_, ns));
    const fs::path dir = fs::path(request.checkpoints_dir()).lexically_normal();
    if (!dir.is_absolute()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoints_dir path '", absl::CHexEscape(request.checkpoints_dir()),
                       "' must be absolute (it is read on the server)"));
    }
    if (absl::Status opened = files.OpenDirectory(dir).status(); !opened.ok()) {
      return absl::Status(opened.code(), absl::StrCat("checkpoints_dir: ", opened.message()));
    }
    ASSIGN_OR_RETURN(const std::vector<analysis::DiscoveredStep> steps,
                     analysis::ListStepDirectories(dir, files));
    for (const analysis::DiscoveredStep& step : steps) {
      RETURN_IF_ERROR(AuditFolderStep(step, files, &out));
    }
    out.set_source(dir.string());
  }
  out.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  spdlog::info("audit by {} in namespace {}: {}: {} steps, {} problems, {} requests", actor, ns,
               absl::CHexEscape(out.source()), out.steps_size(), out.problems_size(),
               out.requests());
  return out;
}

}  // namespace anisoscope::server
