#include "analysis/tokenizer/regex_splitter.h"

#include <oniguruma.h>

#include <algorithm>
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

// Oniguruma's message for `code`.
std::string OnigMessage(int code) {
  OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
  onig_error_code_to_str(message, code);
  return reinterpret_cast<const char*>(message);
}

// Per-search limits, freed with the Split that made them.
struct MatchParam {
  explicit MatchParam(unsigned long retries) : param(onig_new_match_param()) {
    onig_initialize_match_param(param);
    onig_set_retry_limit_in_search_of_match_param(param, retries);
    onig_set_retry_limit_in_match_of_match_param(param, retries);
  }
  ~MatchParam() { onig_free_match_param(param); }
  MatchParam(const MatchParam&) = delete;
  MatchParam& operator=(const MatchParam&) = delete;
  OnigMatchParam* param;
};

}  // namespace

RegexBudget RegexBudget::ForText(size_t bytes) {
  RegexBudget budget;
  const size_t most = static_cast<size_t>(-1) / 64;
  budget.retries_per_search =
      std::max<unsigned long>(kMinRetriesPerSearch, std::min(bytes, most) * 32);
  budget.allowed = std::chrono::milliseconds(500) +
                   std::chrono::microseconds(static_cast<int64_t>(std::min(bytes, most)));
  return budget;
}

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
      onig_new(&regex->compiled, Bytes(pattern), Bytes(pattern) + pattern.size(), ONIG_OPTION_NONE,
               ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &error_info);
  if (result != ONIG_NORMAL) {
    regex->compiled = nullptr;
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, result, &error_info);
    return absl::InvalidArgumentError(
        absl::StrCat("regex does not compile: ", reinterpret_cast<const char*>(message)));
  }
  return std::unique_ptr<RegexSplitter>(new RegexSplitter(std::move(regex)));
}

absl::StatusOr<std::vector<std::string_view>> RegexSplitter::Split(std::string_view text,
                                                                   RegexBudget* budget) const {
  using Clock = RegexBudget::Clock;
  const Clock::time_point started = Clock::now();
  // Checks the clock every kSearchesPerCheck searches: a few ns a search.
  constexpr int kSearchesPerCheck = 4;
  int searches = 0;
  std::vector<std::string_view> pieces;
  const MatchParam limits(budget->retries_per_search);
  std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> region(
      onig_region_new(), [](OnigRegion* r) { onig_region_free(r, /*free_self=*/1); });
  const OnigUChar* begin = Bytes(text);
  const OnigUChar* end = begin + text.size();
  size_t piece_start = 0;  // Start of the gap before the next match.
  size_t search_from = 0;
  // As the onig crate's find_iter: an empty match right where the last match ended is
  // skipped by one character; any other match cuts the text.
  size_t last_match_end = std::string_view::npos;
  while (search_from <= text.size()) {
    if (++searches % kSearchesPerCheck == 0 &&
        budget->spent + (Clock::now() - started) > budget->allowed) {
      return absl::InvalidArgumentError(
          absl::StrCat("the regex passed its budget on a text of ", text.size(),
                       " bytes: more than ", std::chrono::duration<double>(budget->allowed).count(),
                       " s of searching; the pattern backtracks too much to be used"));
    }
    const int found = onig_search_with_param(regex_->compiled, begin, end, begin + search_from, end,
                                             region.get(), ONIG_OPTION_NONE, limits.param);
    if (found == ONIG_MISMATCH) break;  // The rest is one gap.
    if (found == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER || found == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER) {
      return absl::InvalidArgumentError(
          absl::StrCat("the regex passed its budget on a text of ", text.size(),
                       " bytes: more than ", budget->retries_per_search,
                       " backtracking retries in one search; the pattern "
                       "backtracks too much to be used"));
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat("the regex failed on a text of ", text.size(),
                                                     " bytes: ", OnigMessage(found)));
    }
    const size_t match_start = static_cast<size_t>(region->beg[0]);
    const size_t match_end = static_cast<size_t>(region->end[0]);
    if (match_start == match_end && match_end == last_match_end) {
      search_from =
          match_start < text.size()
              ? match_start + Utf8SequenceLength(static_cast<unsigned char>(text[match_start]))
              : text.size() + 1;
      continue;
    }
    if (match_start > piece_start) {
      pieces.push_back(text.substr(piece_start, match_start - piece_start));
    }
    if (match_end > match_start)
      pieces.push_back(text.substr(match_start, match_end - match_start));
    piece_start = search_from = last_match_end = match_end;
  }
  if (piece_start < text.size()) pieces.push_back(text.substr(piece_start));
  budget->spent += Clock::now() - started;
  return pieces;
}

}  // namespace anisoscope::analysis::internal
