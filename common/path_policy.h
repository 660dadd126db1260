// PathPolicy: the allowed roots that checkpoints and probes may be read from.
// Immutable after Create; thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope {

class PathPolicy {
 public:
  struct Options {
    // Directories that reads may come from; each must exist. Empty allows nothing.
    std::vector<std::string> allowed_roots;
  };

  static absl::StatusOr<std::unique_ptr<PathPolicy>> Create(const Options& options);

  // Resolves `path` (symlinks included) and returns the canonical path when it lies
  // inside an allowed root; PERMISSION_DENIED when outside, NOT_FOUND when missing.
  // `what` names the field in errors, e.g. "checkpoint" or "probe file".
  absl::StatusOr<std::filesystem::path> Resolve(const std::string& path,
                                                const std::string& what) const;

  const std::vector<std::filesystem::path>& roots() const { return roots_; }

 private:
  explicit PathPolicy(std::vector<std::filesystem::path> roots) : roots_(std::move(roots)) {}

  std::vector<std::filesystem::path> roots_;
};

}  // namespace anisoscope
