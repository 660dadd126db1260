// RegexSplitter: Hugging Face tokenizers' Split pre-tokenizer with behavior "Isolated" (every
// match a piece, every gap between matches a piece) on Oniguruma, the regex engine tokenizers
// itself uses, so patterns such as GPT-2's or Qwen's mean exactly what they mean there
// (\p{L}, \s as the Unicode White_Space property, (?i:...) case folding, lookahead).
// Immutable after Create; Split may be called from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::analysis::internal {

class RegexSplitter {
 public:
  // INVALID_ARGUMENT with Oniguruma's message for a pattern that does not compile.
  static absl::StatusOr<std::unique_ptr<RegexSplitter>> Create(std::string_view pattern);
  ~RegexSplitter();

  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // `text` (valid UTF-8) cut at the start and end of every match: non-empty views into
  // `text` that concatenate back to it.
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  struct Regex;
  explicit RegexSplitter(std::unique_ptr<Regex> regex);

  std::unique_ptr<Regex> regex_;
};

}  // namespace anisoscope::analysis::internal
