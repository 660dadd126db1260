// ByteLevelBpeTokenizer: the byte-level BPE of GPT-2 and GPT-NeoX (Pythia), matching
// Hugging Face tokenizers token for token without special tokens:
//   1. invalid UTF-8 becomes U+FFFD (as decoding with errors="replace");
//   2. added tokens that are not `normalized` (e.g. <|endoftext|>) are split out of the
//      raw text, leftmost-longest;
//   3. the rest is normalized (none, NFC, NFD, NFKC or NFKD) and the `normalized` added
//      tokens (GPT-NeoX's whitespace runs) are split out of it the same way;
//   4. the ByteLevel pre-tokenizer: an optional prefix space, the GPT-2 split pattern
//      (byte_level_pre_tokenizer.h), each piece's bytes mapped by bytes_to_unicode;
//   5. BPE merges by rank (bpe_model.h).
// Immutable after creation apart from an internal, guarded word cache; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/tokenizer/added_tokens.h"
#include "analysis/tokenizer/bpe_files.h"
#include "analysis/tokenizer/bpe_model.h"
#include "analysis/tokenizer/tokenizer.h"

namespace anisoscope::analysis {

class ByteLevelBpeTokenizer : public Tokenizer {
 public:
  // A Hugging Face tokenizer.json with model.type "BPE" and a ByteLevel pre-tokenizer.
  // Errors name the file and the field: malformed JSON, a missing model.vocab or
  // model.merges, an unsupported model, normalizer or pre-tokenizer type.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> FromTokenizerJson(
      const std::filesystem::path& tokenizer_json);

  // GPT-2's vocab.json + merges.txt, configured as HF's GPT2TokenizerFast conversion:
  // no normalizer, ByteLevel without prefix space, <|endoftext|> a special added token.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> FromVocabAndMerges(
      const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt);

  std::vector<int64_t> Encode(std::string_view text) const override;
  int64_t vocab_size() const override { return vocab_size_; }

  // Id of a vocabulary token in byte-to-unicode form ("Ġthe"), or of an added token.
  std::optional<int64_t> TokenId(std::string_view token) const;

 private:
  ByteLevelBpeTokenizer() = default;

  static absl::StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> FromConfig(
      internal::ByteLevelBpeConfig config);

  // Step 3 onwards on text that is free of non-normalized added tokens.
  void EncodeNormalizable(std::string_view text, std::vector<int64_t>* ids) const;
  // Step 4 onwards on one normalized piece.
  void EncodePiece(std::string_view piece, std::vector<int64_t>* ids) const;
  std::string Normalize(std::string_view text) const;

  internal::Normalization normalization_ = internal::Normalization::kNone;
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  internal::AddedTokens raw_added_;
  internal::AddedTokens normalized_added_;
  std::vector<internal::AddedTokens::Token> all_added_;
  std::unique_ptr<internal::BpeModel> model_;
  int64_t vocab_size_ = 0;
};

}  // namespace anisoscope::analysis
