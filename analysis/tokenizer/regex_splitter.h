// RegexSplitter: Hugging Face tokenizers' Split pre-tokenizer with behavior "Isolated" (every
// match a piece, every gap between matches a piece) on Oniguruma, the regex engine tokenizers
// itself uses, so patterns such as GPT-2's or Qwen's mean exactly what they mean there
// (\p{L}, \s as the Unicode White_Space property, (?i:...) case folding, lookahead).
// Every search runs under a RegexBudget: a pattern that backtracks (a tokenizer.json is
// untrusted) fails its text instead of holding the worker.
// Immutable after Create; Split may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::analysis::internal {

// The work the regexes may do for one text being encoded (a probe sample), across every
// Split of it: at most `retries_per_search` backtracking retries in any one Oniguruma search
// (its retry-limit-in-search), and at most `allowed` of searching in all (measured around
// the searches, checked every few of them). So one text costs at most `allowed` plus a few
// searches of ~0.1 s each, whatever the pattern. Not thread-safe: one per text.
struct RegexBudget {
  using Clock = std::chrono::steady_clock;

  // Retries per search whatever the text: about 0.1 s here. Real patterns (GPT-2, LLaMA-3,
  // Qwen2) need a few per byte.
  static constexpr unsigned long kMinRetriesPerSearch = 10'000'000;
  // The budget of a text of `bytes` bytes: kMinRetriesPerSearch or 32 retries per byte if
  // more; 0.5 s of searching plus 1 us per byte (real patterns take ~30 ms per MiB).
  static RegexBudget ForText(size_t bytes);

  unsigned long retries_per_search = kMinRetriesPerSearch;
  Clock::duration allowed = Clock::duration::max();
  // Searching done so far, by Split.
  Clock::duration spent = Clock::duration::zero();
};

class RegexSplitter {
 public:
  // INVALID_ARGUMENT with Oniguruma's message for a pattern that does not compile.
  static absl::StatusOr<std::unique_ptr<RegexSplitter>> Create(std::string_view pattern);
  ~RegexSplitter();

  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // `text` (valid UTF-8) cut at the start and end of every match: non-empty views into
  // `text` that concatenate back to it. Adds its searching to budget->spent. INVALID_ARGUMENT
  // saying which bound was passed (never quoting the text) when the searches pass `budget`,
  // or Oniguruma's error.
  absl::StatusOr<std::vector<std::string_view>> Split(std::string_view text,
                                                      RegexBudget* budget) const;

 private:
  struct Regex;
  explicit RegexSplitter(std::unique_ptr<Regex> regex);

  std::unique_ptr<Regex> regex_;
};

}  // namespace anisoscope::analysis::internal
