#include "analysis/tokenizer/regex_splitter.h"

#include <oniguruma.h>

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/tokenizer/byte_level.h"

namespace anisoscope::analysis::internal {
namespace {

void InitializeOnigurumaOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

const OnigUChar* Bytes(std::string_view text) {
  return reinterpret_cast<const OnigUChar*>(text.data());
}

}  // namespace

struct RegexSplitter::Regex {
  regex_t* compiled = nullptr;
  ~Regex() {
    if (compiled != nullptr) onig_free(compiled);
  }
};

RegexSplitter::RegexSplitter(std::unique_ptr<Regex> regex) : regex_(std::move(regex)) {}
RegexSplitter::~RegexSplitter() = default;

absl::StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(std::string_view pattern) {
  InitializeOnigurumaOnce();
  auto regex = std::make_unique<Regex>();
  OnigErrorInfo error_info;
  const int result =
      onig_new(&regex->compiled, Bytes(pattern), Bytes(pattern) + pattern.size(),
               ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &error_info);
  if (result != ONIG_NORMAL) {
    regex->compiled = nullptr;
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, result, &error_info);
    return absl::InvalidArgumentError(
        absl::StrCat("regex does not compile: ", reinterpret_cast<const char*>(message)));
  }
  return std::unique_ptr<RegexSplitter>(new RegexSplitter(std::move(regex)));
}

std::vector<std::string_view> RegexSplitter::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  OnigRegion* region = onig_region_new();
  const OnigUChar* begin = Bytes(text);
  const OnigUChar* end = begin + text.size();
  size_t piece_start = 0;  // Start of the gap before the next match.
  size_t search_from = 0;
  // As the onig crate's find_iter: an empty match right where the last match ended is
  // skipped by one character; any other match cuts the text.
  size_t last_match_end = std::string_view::npos;
  while (search_from <= text.size()) {
    const int found = onig_search(regex_->compiled, begin, end, begin + search_from, end, region,
                                  ONIG_OPTION_NONE);
    if (found < 0) break;  // ONIG_MISMATCH, or an error: the rest is one gap.
    const size_t match_start = static_cast<size_t>(region->beg[0]);
    const size_t match_end = static_cast<size_t>(region->end[0]);
    if (match_start == match_end && match_end == last_match_end) {
      search_from = match_start < text.size()
                        ? match_start + Utf8SequenceLength(static_cast<unsigned char>(text[match_start]))
                        : text.size() + 1;
      continue;
    }
    if (match_start > piece_start) {
      pieces.push_back(text.substr(piece_start, match_start - piece_start));
    }
    if (match_end > match_start) pieces.push_back(text.substr(match_start, match_end - match_start));
    piece_start = search_from = last_match_end = match_end;
  }
  if (piece_start < text.size()) pieces.push_back(text.substr(piece_start));
  onig_region_free(region, /*free_self=*/1);
  return pieces;
}

}  // namespace anisoscope::analysis::internal
