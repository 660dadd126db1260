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
#include "common/file_gate.h"
#include "storage/metrics_store.h"
#include "storage/types.h"

namespace anisoscope::server {

// OK when `run` is 1..128 characters of [A-Za-z0-9._-]; INVALID_ARGUMENT otherwise.
absl::Status ValidateRunName(const std::string& run);

// Validates the request, opens the probe file and every checkpoint through `files` (the
// caller's namespace's gate) and, for checkpoints_dir, discovers the step directories.
// Paths are kept as given (lexically normal): the worker opens them again through its own
// gate, so a check here is never relied on later. The checkpoints come back ascending by
// step. INVALID_ARGUMENT for a bad spec (bad run name, no probe source or path, negative
// counts, neither or both of checkpoints_dir and checkpoints, duplicate steps),
// PERMISSION_DENIED for a path the gate refuses (outside the roots or missing: one answer,
// naming only the path given). With a source (exactly one of checkpoints_dir, checkpoints and
// source), the source is checked for its shape only and kept (spec.source, serialized; a
// followed source's description in follow_dir), the checkpoints left for JobSubmission to
// list. Blocks on file-system reads.
absl::StatusOr<storage::JobSpec> JobSpecFromRequest(
    const ::anisoscope::v1::SubmitJobRequest& request, const FileGate& files);

// The whole step directories of followed directory `dir` that are not in `known` and not
// past `until_step`, read through `files` (PERMISSION_DENIED for one that leads out of its
// roots), ascending. Steps still being written (analysis::CheckCheckpointComplete) are left
// for a later call. Blocks on file-system reads (headers only).
absl::StatusOr<std::vector<storage::CheckpointSpec>> NewWholeCheckpoints(
    const std::filesystem::path& dir, const std::set<int64_t>& known,
    std::optional<int64_t> until_step, const FileGate& files);

// The gate of namespace `ns`: the server's roots (`server_files`) when the namespace has
// none of its own, else those of its own that lie inside the server's, each opened beneath
// a server root with no symbolic link on the way (FileGate::Intersect), at every call.
// PERMISSION_DENIED when none is left; the store's error otherwise. Blocks on a SQLite read and the
// roots' opening.
absl::StatusOr<FileGate> GateForNamespace(storage::MetricsStore& store,
                                          const FileGate& server_files, const std::string& ns);

}  // namespace anisoscope::server
