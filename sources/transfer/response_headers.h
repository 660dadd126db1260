// The header fields of one HTTP answer, looked up by name without regard to case. Filled
// from libcurl's header callback, one line at a time, under a byte bound.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace anisoscope::transfer {

class ResponseHeaders {
 public:
  // The most bytes of names and values kept: an answer past it is refused (curl bounds
  // each line; this bounds their number).
  static constexpr size_t kMaxBytes = 256 << 10;

  // The first field named `name` (any case), its value trimmed; nullopt when absent.
  std::optional<std::string> Get(absl::string_view name) const;
  // Every field named `name`, in order (e.g. several Link fields).
  std::vector<std::string> GetAll(absl::string_view name) const;
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

  // Adds one raw header line ("Name: value\r\n"); a status line ("HTTP/...") starts a new
  // answer and clears what came before (a 100 Continue's fields). False past kMaxBytes.
  bool AddLine(absl::string_view line);
  void Clear();

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // names in lower case
  size_t bytes_ = 0;
};

}  // namespace anisoscope::transfer
