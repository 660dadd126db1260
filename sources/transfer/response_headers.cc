#include "sources/transfer/response_headers.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace anisoscope::transfer {

std::optional<std::string> ResponseHeaders::Get(absl::string_view name) const {
  for (const auto& [field, value] : fields_) {
    if (absl::EqualsIgnoreCase(field, name)) return value;
  }
  return std::nullopt;
}

std::vector<std::string> ResponseHeaders::GetAll(absl::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [field, value] : fields_) {
    if (absl::EqualsIgnoreCase(field, name)) values.push_back(value);
  }
  return values;
}

bool ResponseHeaders::AddLine(absl::string_view line) {
  if (absl::StartsWith(line, "HTTP/")) {
    Clear();
    return true;
  }
  const size_t colon = line.find(':');
  // The blank line that ends the fields, and obsolete folded continuations, carry none.
  if (colon == absl::string_view::npos || colon == 0) return true;
  bytes_ += line.size();
  if (bytes_ > kMaxBytes) return false;
  fields_.emplace_back(absl::AsciiStrToLower(line.substr(0, colon)),
                       std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  return true;
}

void ResponseHeaders::Clear() {
  fields_.clear();
  bytes_ = 0;
}

}  // namespace anisoscope::transfer
