// Validation of a SubmitJobRequest and its translation into a stored JobSpec.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/path_policy.h"
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

}  // namespace anisoscope::server
