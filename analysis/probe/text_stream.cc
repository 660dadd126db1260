#include "analysis/probe/text_stream.h"

#include <algorithm>
#include <limits>
#include <string>

#include "common/status_macros.h"

namespace anisoscope::analysis::internal {
namespace {

constexpr size_t kMinPrefixBytes = size_t{1} << 20;
constexpr size_t kBytesPerId = 8;

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n'; }

// Appends the next line of `in` to `text` in universal-newline form; false at end of file.
bool AppendLine(std::istream& in, std::string* text) {
  std::string line;
  if (!std::getline(in, line)) return false;
  const bool has_newline = !in.eof();
  if (has_newline && !line.empty() && line.back() == '\r') line.pop_back();  // "\r\n"
  std::replace(line.begin(), line.end(), '\r', '\n');                        // lone "\r"
  text->append(line);
  if (has_newline) text->push_back('\n');
  return true;
}

// Length of the longest prefix of `text` that ends with an ASCII letter or digit followed by
// ASCII whitespace; 0 if there is none.
size_t SafeCut(const std::string& text) {
  for (size_t i = text.size(); i >= 2; --i) {
    if (IsAsciiSpace(text[i - 1]) && IsAsciiAlnum(text[i - 2])) return i - 1;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> EncodeLeadingIds(std::istream& in, const Tokenizer& tokenizer,
                                                      size_t count) {
  std::string text;
  const size_t max = std::numeric_limits<size_t>::max();
  size_t budget = std::max(kMinPrefixBytes, count > max / kBytesPerId ? max : kBytesPerId * count);
  while (true) {
    bool more = true;
    while (text.size() < budget && (more = AppendLine(in, &text))) {
    }
    std::vector<int64_t> ids;
    if (!more) {
      ASSIGN_OR_RETURN(ids, tokenizer.Encode(text));
    } else if (const size_t cut = SafeCut(text); cut > 0) {
      ASSIGN_OR_RETURN(ids, tokenizer.Encode(std::string_view(text).substr(0, cut)));
    }
    if (!more || ids.size() >= count) {
      ids.resize(std::min(ids.size(), count));
      return ids;
    }
    budget = budget > max / 2 ? max : 2 * budget;
  }
}

}  // namespace anisoscope::analysis::internal
