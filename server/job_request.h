// Validation of a SubmitJobRequest and its translation into a stored JobSpec.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/path_policy.h"
#include "storage/metrics_store.h"
#include "storage/types.h"

namespace anisoscope::server {

// OK when `run` is 1..128 characters of [A-Za-z0-9._-]; INVALID_ARGUMENT otherwise.
absl::Status ValidateRunName(const std::string& run);

// Validates the request, resolves the probe file and every checkpoint with `policy`
// (canonical paths; symlinks resolved) and, for checkpoints_dir, discovers the step
// directories. The checkpoints come back ascending by step. INVALID_ARGUMENT for a bad
// spec (bad run name, no probe source or path, negative counts, neither or both of
// checkpoints_dir and checkpoints, duplicate steps, a checkpoint that is not a directory),
// PERMISSION_DENIED for a path outside the allowed roots, NOT_FOUND for a missing path.
// Blocks on file-system reads.
absl::StatusOr<storage::JobSpec> JobSpecFromRequest(
    const ::anisoscope::v1::SubmitJobRequest& request, const PathPolicy& policy);

// The whole step directories of followed directory `dir` that are not in `known` and not
// past `until_step`, resolved with `policy` (PERMISSION_DENIED for one that escapes it),
// ascending. Steps still being written (analysis::CheckCheckpointComplete) are left for a
// later call. Blocks on file-system reads (headers only).
absl::StatusOr<std::vector<storage::CheckpointSpec>> NewWholeCheckpoints(
    const std::filesystem::path& dir, const std::set<int64_t>& known,
    std::optional<int64_t> until_step, const PathPolicy& policy);

// The roots namespace `ns` may read from: the server's (`server_policy`) when the namespace
// has none of its own, else those of its own that lie inside the server's.
// PERMISSION_DENIED when none of them does; the store's error otherwise. Blocks on a
// SQLite read and the roots' resolution.
absl::StatusOr<std::unique_ptr<PathPolicy>> PolicyForNamespace(storage::MetricsStore& store,
                                                               const PathPolicy& server_policy,
                                                               const std::string& ns);

}  // namespace anisoscope::server
