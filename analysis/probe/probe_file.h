// Helpers shared by the probe readers (probe.cc, text_probe.cc); not part of the contract.
#pragma once

#include <cstdint>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <istream>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_gate.h"

namespace anisoscope::analysis::internal {

// INVALID_ARGUMENT unless max_samples > 0 and seq_len >= min_seq_len; names the file.
absl::Status CheckProbeLimits(const std::filesystem::path& file, int64_t max_samples,
                              int64_t seq_len, int64_t min_seq_len);

// A probe file opened through a FileGate, read as a stream. Not thread-safe.
class ProbeFile {
 public:
  // The gate's error, prefixed "probe file: ", when it refuses `file`.
  static absl::StatusOr<std::unique_ptr<ProbeFile>> Open(const std::filesystem::path& file,
                                                         const FileGate& gate);
  std::istream& stream() { return stream_; }

 private:
  explicit ProbeFile(UniqueFd fd);

  __gnu_cxx::stdio_filebuf<char> buffer_;  // owns the descriptor
  std::istream stream_;
};

}  // namespace anisoscope::analysis::internal
