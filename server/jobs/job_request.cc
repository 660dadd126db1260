#include "server/jobs/job_request.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/step_discovery.h"
#include "analysis/checkpoint/weight_files.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/probe/probe.h"
#include "common/status_macros.h"
#include "server/sources/source_description.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {

namespace fs = std::filesystem;

namespace {

// `status` (a gate's refusal, naming the path given) prefixed by the field it came in.
absl::Status InField(const char* field, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message()));
}

// `given` lexically normal; INVALID_ARGUMENT naming `field` unless it is absolute.
absl::StatusOr<fs::path> AbsolutePath(const char* field, const std::string& given) {
  fs::path path = fs::path(given).lexically_normal();
  if (!path.is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " path '", given, "' must be absolute (it is read on the server)"));
  }
  return path;
}

// A checkpoint directory opened through the gate, each of its entries too: a weight file
// linked elsewhere (a Hugging Face cache snapshot links into its blobs/) is refused at
// submit rather than at its step. The worker's gate checks again at open time.
absl::StatusOr<fs::path> CheckCheckpointDir(const std::string& dir, const FileGate& files) {
  ASSIGN_OR_RETURN(const fs::path path, AbsolutePath("checkpoint", dir));
  absl::StatusOr<std::vector<GatedEntry>> entries = files.List(path);
  if (!entries.ok()) return InField("checkpoint", entries.status());
  for (const GatedEntry& entry : *entries) {
    if (entry.is_link && !entry.is_file && !entry.is_directory) {
      return absl::PermissionDeniedError(absl::StrCat(
          "checkpoint file '", (path / entry.name).string(), "' is not beneath an allowed root"));
    }
  }
  return path;
}

}  // namespace

absl::Status ValidateRunName(const std::string& run) {
  if (run.empty() || run.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("run name must be 1 to 128 characters, got ", run.size()));
  }
  for (char c : run) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("run name '", run, "' may contain only A-Z a-z 0-9 . _ -"));
    }
  }
  return absl::OkStatus();
}

// Catches a malformed probe at submit time rather than once per checkpoint. A token file is
// read once, bounded, by JobRunner::Submit (server/jobs/unit_probe.h); text needs each
// checkpoint's tokenizer, so only its sequence length is checked here: WordPiece
// checkpoints (vocab.txt) frame every sample as [CLS] … [SEP]; byte-level BPE samples carry
// no special tokens.
absl::Status CheckProbe(const storage::JobSpec& spec, const FileGate& files) {
  if (spec.probe_source == "text") {
    const bool framed = std::any_of(spec.checkpoints.begin(), spec.checkpoints.end(),
                                    [&files](const storage::CheckpointSpec& c) {
                                      return files.IsFile(fs::path(c.path) / "vocab.txt");
                                    });
    if (framed && spec.seq_len != 0 && spec.seq_len < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe.seq_len must be at least 3 for a text probe on WordPiece checkpoints "
                       "([CLS] … [SEP]), got ",
                       spec.seq_len));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::JobSpec> JobSpecFromRequest(const pb::SubmitJobRequest& request,
                                                    const FileGate& files) {
  if (absl::Status status = ValidateRunName(request.run()); !status.ok()) return status;
  storage::JobSpec spec;
  spec.run = request.run();
  spec.force = request.force();
  spec.dedupe = request.dedupe();
  if (!request.has_probe()) {
    return absl::InvalidArgumentError(
        "probe is required: name a probe file with --probe-text FILE or --probe-tokens FILE "
        "(Python: probe_text= or probe_tokens=)");
  }
  if (absl::Status status = ProbeSpecFromProto(request.probe(), &spec); !status.ok()) {
    return status;
  }
  if (request.probe().path().empty()) return absl::InvalidArgumentError("probe.path is required");
  absl::StatusOr<analysis::MetricGroups> groups =
      analysis::ParseMetricGroups(request.probe().metrics());
  if (!groups.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("probe.metrics: ", groups.status().message()));
  }
  spec.metrics = analysis::MetricGroupsText(*groups);

  const bool has_dir = !request.checkpoints_dir().empty();
  const bool has_list = request.checkpoints_size() > 0;
  const bool has_source = request.has_source();
  if (int{has_dir} + int{has_list} + int{has_source} != 1) {
    return absl::InvalidArgumentError(
        "give either checkpoints_dir or checkpoints, or a source (exactly one)");
  }

  ASSIGN_OR_RETURN(const fs::path probe_path, AbsolutePath("probe file", request.probe().path()));
  if (absl::Status opened = files.OpenFile(probe_path).status(); !opened.ok()) {
    return InField("probe file", opened);
  }
  spec.probe_path = probe_path.string();

  if (request.follow() && has_list) {
    return absl::InvalidArgumentError(
        "follow watches checkpoints_dir: give checkpoints_dir (or a source)");
  }
  if (request.has_until_step() && !request.follow()) {
    return absl::InvalidArgumentError("until_step applies to follow only");
  }
  if (request.hf_cache() && !has_dir) {
    return absl::InvalidArgumentError("hf_cache describes checkpoints_dir: give checkpoints_dir");
  }
  if (has_source) {
    // Checked here for its shape; the allow-lists and the listing are JobSubmission's
    // (server/jobs/source_steps.h), which fills the checkpoints.
    RETURN_IF_ERROR(ValidateSource(request.source()));
    spec.source = request.source().SerializeAsString();
    if (request.follow()) {
      spec.follow_dir = DescribeSource(request.source());
      if (request.has_until_step()) spec.until_step = request.until_step();
    }
    return spec;
  }
  if (has_dir) {
    ASSIGN_OR_RETURN(const fs::path dir,
                     AbsolutePath("checkpoints_dir", request.checkpoints_dir()));
    if (absl::Status opened = files.OpenDirectory(dir).status(); !opened.ok()) {
      return InField("checkpoints_dir", opened);
    }
    if (request.hf_cache() && !analysis::IsHfCacheRepository(dir, files)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoints_dir '", request.checkpoints_dir(),
                       "' is not a Hugging Face cache repository (models--ORG--NAME with refs/ and "
                       "snapshots/)"));
    }
    if (request.follow()) {
      spec.follow_dir = dir.string();
      if (request.has_until_step()) spec.until_step = request.until_step();
      ASSIGN_OR_RETURN(spec.checkpoints, NewWholeCheckpoints(dir, {}, spec.until_step, files));
      RETURN_IF_ERROR(CheckProbe(spec, files));
      return spec;
    }
    absl::StatusOr<std::vector<analysis::DiscoveredStep>> steps =
        analysis::DiscoverSteps(dir, files);
    if (!steps.ok()) return steps.status();
    for (const analysis::DiscoveredStep& step : *steps) {
      absl::StatusOr<fs::path> path = CheckCheckpointDir(step.path.string(), files);
      if (!path.ok()) return path.status();
      spec.checkpoints.push_back({step.step, path->string()});
    }
  } else {
    for (const pb::CheckpointRef& ref : request.checkpoints()) {
      if (ref.step() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint step must be >= 0, got ", ref.step()));
      }
      absl::StatusOr<fs::path> path = CheckCheckpointDir(ref.path(), files);
      if (!path.ok()) return path.status();
      spec.checkpoints.push_back({ref.step(), path->string()});
    }
  }
  std::sort(spec.checkpoints.begin(), spec.checkpoints.end(),
            [](const storage::CheckpointSpec& a, const storage::CheckpointSpec& b) {
              return a.step < b.step;
            });
  for (size_t i = 1; i < spec.checkpoints.size(); ++i) {
    if (spec.checkpoints[i].step == spec.checkpoints[i - 1].step) {
      return absl::InvalidArgumentError(
          absl::StrCat("two checkpoints share step ", spec.checkpoints[i].step));
    }
  }
  if (spec.checkpoints.empty()) return absl::InvalidArgumentError("the job has no checkpoints");
  if (absl::Status status = CheckProbe(spec, files); !status.ok()) return status;
  return spec;
}

absl::StatusOr<std::vector<storage::CheckpointSpec>> NewWholeCheckpoints(
    const fs::path& dir, const std::set<int64_t>& known, std::optional<int64_t> until_step,
    const FileGate& files) {
  ASSIGN_OR_RETURN(const std::vector<analysis::DiscoveredStep> steps,
                   analysis::ListStepDirectories(dir, files));
  std::vector<storage::CheckpointSpec> found;
  for (const analysis::DiscoveredStep& step : steps) {
    if (known.count(step.step) > 0 || (until_step.has_value() && step.step > *until_step)) {
      continue;
    }
    if (absl::Status whole = analysis::CheckCheckpointComplete(step.path, files); !whole.ok()) {
      spdlog::debug("following {}: step {} not whole yet: {}", dir.string(), step.step,
                    std::string(whole.message()));
      continue;
    }
    ASSIGN_OR_RETURN(const fs::path path, CheckCheckpointDir(step.path.string(), files));
    found.push_back({step.step, path.string()});
  }
  return found;
}

absl::StatusOr<FileGate> GateForNamespace(storage::MetricsStore& store,
                                          const FileGate& server_files, const std::string& ns) {
  ASSIGN_OR_RETURN(const std::vector<std::string> own, store.NamespaceRoots(ns));
  if (own.empty()) return server_files;
  // A root removed from disk, or re-pointed by a link, is left out.
  FileGate gate = server_files.Intersect(own);
  if (gate.roots().empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "namespace '", ns, "' may read only from roots outside the server's --allow-root"));
  }
  return gate;
}

}  // namespace anisoscope::server
