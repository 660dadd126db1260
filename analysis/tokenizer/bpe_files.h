// Readers of byte-level BPE tokenizer files: Hugging Face tokenizer.json, and GPT-2's
// vocab.json + merges.txt. They only parse and check; ByteLevelBpeTokenizer builds the
// tokenizer from the result. Errors name the file and the field. Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "analysis/tokenizer/added_tokens.h"

namespace anisoscope::analysis::internal {

enum class Normalization { kNone, kNfc, kNfd, kNfkc, kNfkd };

// Everything a ByteLevelBpeTokenizer is made of.
struct ByteLevelBpeConfig {
  // The file(s) read, for messages.
  std::string source;
  Normalization normalization = Normalization::kNone;
  // ByteLevel pre-tokenizer settings.
  bool add_prefix_space = false;
  bool use_regex = true;
  // Added tokens matched on the raw text (normalized: false) and on normalized text.
  std::vector<AddedTokens::Token> raw_added;
  std::vector<AddedTokens::Token> normalized_added;
  // BPE model.
  absl::flat_hash_map<std::string, int64_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::optional<std::string> unk_token;
  bool ignore_merges = false;
};

absl::StatusOr<ByteLevelBpeConfig> ReadTokenizerJson(const std::filesystem::path& file);

absl::StatusOr<ByteLevelBpeConfig> ReadVocabAndMerges(const std::filesystem::path& vocab_json,
                                                      const std::filesystem::path& merges_txt);

}  // namespace anisoscope::analysis::internal
