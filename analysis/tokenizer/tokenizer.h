// Tokenizer: text -> token ids, the seam between a checkpoint's tokenizer files and the
// probes. Implementations: WordPieceTokenizer (BERT), BpeTokenizer (GPT-2, GPT-NeoX).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace anisoscope::analysis {

// Immutable after creation; Encode may be called from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text` (UTF-8; invalid bytes handled as the implementation states),
  // without any special tokens ([CLS], <|endoftext|>, ...) added around them.
  // INVALID_ARGUMENT naming the tokenizer file and field when the text passes a bound of
  // the file's own rules (a BPE pre-tokenizer regex's budget, regex_splitter.h).
  virtual absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text) const = 0;
  // One more than the largest id Encode can return (added tokens included).
  virtual int64_t vocab_size() const = 0;
};

}  // namespace anisoscope::analysis
