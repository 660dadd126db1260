// PreTokenizer: a tokenizer.json pre_tokenizer (ByteLevel, Split, Metaspace, or a Sequence of
// them) turning one normalized piece of text into the words the BPE model merges within.
// Immutable after Create; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/tokenizer/bpe_files.h"
#include "analysis/tokenizer/regex_splitter.h"

namespace anisoscope::analysis::internal {

class PreTokenizer {
 public:
  // Compiles the Split patterns; errors say which step's pattern is bad. No steps: the
  // whole piece is one word.
  static absl::StatusOr<PreTokenizer> Create(const std::vector<PreTokenizerStep>& steps);

  // The words of `piece`; `starts_text` when the piece begins the encoded text (Metaspace's
  // prepend_scheme "first"). Byte-level words are raw bytes (the model maps them). Every
  // regex runs under `budget`, the whole text's (updated); past it, INVALID_ARGUMENT naming
  // the step's pattern field (PreTokenizerStep::field), never quoting the text.
  absl::StatusOr<std::vector<std::string>> Split(std::string_view piece, bool starts_text,
                                                 RegexBudget* budget) const;

  // Whether a ByteLevel step maps the words' bytes to characters (the last step if so).
  bool byte_level() const;

 private:
  struct Step {
    PreTokenizerStep config;
    std::shared_ptr<const RegexSplitter> splitter;  // kSplit, and kByteLevel with use_regex.
  };

  std::vector<Step> steps_;
};

}  // namespace anisoscope::analysis::internal
