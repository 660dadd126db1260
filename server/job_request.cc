#include "server/job_request.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "analysis/checkpoint/step_discovery.h"
#include "analysis/checkpoint/weight_files.h"
#include "analysis/probe/probe.h"
#include "common/status_macros.h"
#include "server/proto_convert.h"

namespace anisoscope::server {

namespace fs = std::filesystem;

namespace {

// A checkpoint directory resolved inside the roots, and each of its entries too: a symlinked
// step, or a weight file linked elsewhere (a Hugging Face cache snapshot links into its
// blobs/), must not lead out of them.
absl::StatusOr<fs::path> ResolveCheckpointDir(const std::string& dir, const PathPolicy& policy) {
  ASSIGN_OR_RETURN(fs::path resolved, policy.Resolve(dir, "checkpoint"));
  std::error_code ec;
  if (!fs::is_directory(resolved, ec)) return resolved;  // the caller names it
  for (fs::directory_iterator it(resolved, ec), end; !ec && it != end; it.increment(ec)) {
    RETURN_IF_ERROR(policy.Resolve(it->path().string(), "checkpoint file").status());
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  return resolved;
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
// read (its first `samples` lines only); text needs each checkpoint's tokenizer, so only
// its sequence length is checked here: WordPiece checkpoints (vocab.txt) frame every
// sample as [CLS] … [SEP]; byte-level BPE samples carry no special tokens.
absl::Status CheckProbe(const storage::JobSpec& spec) {
  if (spec.probe_source == "text") {
    const bool framed = std::any_of(spec.checkpoints.begin(), spec.checkpoints.end(),
                                    [](const storage::CheckpointSpec& c) {
                                      std::error_code error;
                                      return fs::exists(fs::path(c.path) / "vocab.txt", error);
                                    });
    if (framed && spec.seq_len != 0 && spec.seq_len < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe.seq_len must be at least 3 for a text probe on WordPiece checkpoints "
                       "([CLS] … [SEP]), got ",
                       spec.seq_len));
    }
    return absl::OkStatus();
  }
  const int64_t seq_len = spec.seq_len > 0 ? spec.seq_len : std::numeric_limits<int64_t>::max();
  return analysis::ReadTokenProbe(spec.probe_path, spec.samples, seq_len).status();
}

absl::StatusOr<storage::JobSpec> JobSpecFromRequest(const pb::SubmitJobRequest& request,
                                                    const PathPolicy& policy) {
  if (absl::Status status = ValidateRunName(request.run()); !status.ok()) return status;
  storage::JobSpec spec;
  spec.run = request.run();
  spec.force = request.force();
  spec.dedupe = request.dedupe();
  if (!request.has_probe()) return absl::InvalidArgumentError("probe is required");
  if (absl::Status status = ProbeSpecFromProto(request.probe(), &spec); !status.ok()) {
    return status;
  }
  if (request.probe().path().empty()) return absl::InvalidArgumentError("probe.path is required");

  const bool has_dir = !request.checkpoints_dir().empty();
  const bool has_list = request.checkpoints_size() > 0;
  if (has_dir == has_list) {
    return absl::InvalidArgumentError("give either checkpoints_dir or checkpoints (exactly one)");
  }

  absl::StatusOr<fs::path> probe_path = policy.Resolve(request.probe().path(), "probe file");
  if (!probe_path.ok()) return probe_path.status();
  std::error_code error;
  if (!fs::is_regular_file(*probe_path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe file '", request.probe().path(), "' is not a regular file"));
  }
  spec.probe_path = probe_path->string();

  if (request.follow() && !has_dir) {
    return absl::InvalidArgumentError("follow watches checkpoints_dir: give checkpoints_dir");
  }
  if (request.has_until_step() && !request.follow()) {
    return absl::InvalidArgumentError("until_step applies to follow only");
  }
  if (request.hf_cache() && !has_dir) {
    return absl::InvalidArgumentError("hf_cache describes checkpoints_dir: give checkpoints_dir");
  }
  if (has_dir) {
    absl::StatusOr<fs::path> dir = policy.Resolve(request.checkpoints_dir(), "checkpoints_dir");
    if (!dir.ok()) return dir.status();
    if (!fs::is_directory(*dir, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoints_dir '", request.checkpoints_dir(), "' is not a directory"));
    }
    if (request.hf_cache() && !analysis::IsHfCacheRepository(*dir)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoints_dir '", request.checkpoints_dir(),
                       "' is not a Hugging Face cache repository (models--ORG--NAME with refs/ and "
                       "snapshots/)"));
    }
    if (request.follow()) {
      spec.follow_dir = dir->string();
      if (request.has_until_step()) spec.until_step = request.until_step();
      ASSIGN_OR_RETURN(spec.checkpoints, NewWholeCheckpoints(*dir, {}, spec.until_step, policy));
      RETURN_IF_ERROR(CheckProbe(spec));
      return spec;
    }
    absl::StatusOr<std::vector<analysis::DiscoveredStep>> steps = analysis::DiscoverSteps(*dir);
    if (!steps.ok()) return steps.status();
    for (const analysis::DiscoveredStep& step : *steps) {
      absl::StatusOr<fs::path> path = ResolveCheckpointDir(step.path.string(), policy);
      if (!path.ok()) return path.status();
      spec.checkpoints.push_back({step.step, path->string()});
    }
  } else {
    for (const pb::CheckpointRef& ref : request.checkpoints()) {
      if (ref.step() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint step must be >= 0, got ", ref.step()));
      }
      absl::StatusOr<fs::path> path = ResolveCheckpointDir(ref.path(), policy);
      if (!path.ok()) return path.status();
      if (!fs::is_directory(*path, error)) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint '", ref.path(), "' is not a directory"));
      }
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
  if (absl::Status status = CheckProbe(spec); !status.ok()) return status;
  return spec;
}

absl::StatusOr<std::vector<storage::CheckpointSpec>> NewWholeCheckpoints(
    const fs::path& dir, const std::set<int64_t>& known, std::optional<int64_t> until_step,
    const PathPolicy& policy) {
  ASSIGN_OR_RETURN(const std::vector<analysis::DiscoveredStep> steps,
                   analysis::ListStepDirectories(dir));
  std::vector<storage::CheckpointSpec> found;
  for (const analysis::DiscoveredStep& step : steps) {
    if (known.count(step.step) > 0 || (until_step.has_value() && step.step > *until_step)) {
      continue;
    }
    if (absl::Status whole = analysis::CheckCheckpointComplete(step.path); !whole.ok()) {
      spdlog::debug("following {}: step {} not whole yet: {}", dir.string(), step.step,
                    std::string(whole.message()));
      continue;
    }
    ASSIGN_OR_RETURN(const fs::path path, ResolveCheckpointDir(step.path.string(), policy));
    found.push_back({step.step, path.string()});
  }
  return found;
}

absl::StatusOr<std::unique_ptr<PathPolicy>> PolicyForNamespace(storage::MetricsStore& store,
                                                               const PathPolicy& server_policy,
                                                               const std::string& ns) {
  ASSIGN_OR_RETURN(const std::vector<std::string> own, store.NamespaceRoots(ns));
  std::vector<std::string> roots;
  if (own.empty()) {
    for (const fs::path& root : server_policy.roots()) roots.push_back(root.string());
  }
  for (const std::string& root : own) {
    absl::StatusOr<fs::path> inside = server_policy.Resolve(root, "namespace root");
    if (inside.ok()) roots.push_back(inside->string());
  }
  if (roots.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "namespace '", ns, "' may read only from roots outside the server's --allow-root"));
  }
  return PathPolicy::Create({roots});
}

}  // namespace anisoscope::server
