// Helpers shared by the probe readers (probe.cc, text_probe.cc); not part of the contract.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"

namespace anisoscope::analysis::internal {

// INVALID_ARGUMENT unless max_samples > 0 and seq_len >= min_seq_len; names the file.
absl::Status CheckProbeLimits(const std::filesystem::path& file, int64_t max_samples,
                              int64_t seq_len, int64_t min_seq_len);

// Opens `file` for reading: NOT_FOUND if missing, INVALID_ARGUMENT if unreadable.
absl::Status OpenProbeFile(const std::filesystem::path& file, std::ifstream* in);

}  // namespace anisoscope::analysis::internal
