// Process-wide spdlog setup for the server: one stderr sink, a level from flags.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace anisoscope {

// `level` is one of trace, debug, info, warn, error. Call once from main.
absl::Status SetUpLogging(const std::string& level);

}  // namespace anisoscope
