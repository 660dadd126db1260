// The device names anisoscope accepts on its command lines: cpu, cuda, cuda:N. Whether the
// device exists is the engine's question (CreateTorchExtractor); this is only the syntax.
#pragma once

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace anisoscope {

inline bool IsDeviceName(const std::string& value) {
  int index = 0;
  return value == "cpu" || value == "cuda" ||
         (absl::StartsWith(value, "cuda:") && absl::SimpleAtoi(value.substr(5), &index) &&
          index >= 0);
}

}  // namespace anisoscope
