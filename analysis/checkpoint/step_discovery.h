// Maps a directory of checkpoint directories to training steps: either a directory whose
// subdirectories' names carry the steps, or a Hugging Face cache repository
// (models--ORG--NAME: refs/REVISION files naming commits, snapshots/COMMIT/ holding the
// files), whose revision names carry them. Every directory is listed and every file read
// through the FileGate given; a cache's refs and snapshots are read through a gate within
// the cache folder, so nothing outside it is opened. Pure functions of the file system;
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

struct DiscoveredStep {
  int64_t step = 0;
  std::filesystem::path path;
};

// The training step named by a checkpoint directory name, e.g.
// "multiberts-seed_0-step_20k" -> 20000, "step_600" -> 600, "step40" -> 40,
// "checkpoint-200" -> 200, "stage1-step1000-tokens4B" -> 1000, "step_1M" -> 1000000,
// "ckpt_042" -> 42 (LLM360's checkpoint index). nullopt when the name carries no step.
std::optional<int64_t> ParseStep(std::string_view directory_name);

// The subdirectories of `dir` whose names carry a step, sorted by step; for a Hugging Face
// cache repository, the snapshots of the refs whose revision names carry one (a ref whose
// snapshot is not there yet is skipped). Entries without a step in their name, and plain
// files, are ignored. INVALID_ARGUMENT when two share a step, none is found, or a ref holds
// no commit hash (its content is never quoted; a ref over 1 KiB is refused unread);
// PERMISSION_DENIED for a link named as a step that leads nowhere beneath the gate's roots.
absl::StatusOr<std::vector<DiscoveredStep>> DiscoverSteps(const std::filesystem::path& dir,
                                                          const FileGate& gate);
// The same, where none is no error (a followed run before its first checkpoint).
absl::StatusOr<std::vector<DiscoveredStep>> ListStepDirectories(const std::filesystem::path& dir,
                                                                const FileGate& gate);

// Whether `dir` is laid out as a Hugging Face cache repository (refs/ and snapshots/
// directories of its own, seen through `gate`).
bool IsHfCacheRepository(const std::filesystem::path& dir, const FileGate& gate);

}  // namespace anisoscope::analysis
