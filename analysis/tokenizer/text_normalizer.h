// TextNormalizer: a tokenizer.json normalizer (NFC, NFD, NFKC, NFKD, Prepend, Replace, or a
// Sequence of them) applied to valid UTF-8. Immutable; thread-safe; never fails.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/tokenizer/bpe_files.h"

namespace anisoscope::analysis::internal {

class TextNormalizer {
 public:
  TextNormalizer() = default;
  explicit TextNormalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  std::string Normalize(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace anisoscope::analysis::internal
