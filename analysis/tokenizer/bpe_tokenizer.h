// BpeTokenizer: Hugging Face tokenizers' BPE pipeline, matching it token for token without
// special tokens, for the byte-level BPE of GPT-2, GPT-NeoX (Pythia), Qwen, LLaMA-3 and
// OLMo-2 and the byte-fallback BPE of LLaMA-2 and Mistral (tokenizer.json, or the
// SentencePiece tokenizer.model converted):
//   1. invalid UTF-8 becomes U+FFFD (as decoding with errors="replace");
//   2. added tokens that are not `normalized` (e.g. <|endoftext|>, <s>) are split out of the
//      raw text, leftmost-longest;
//   3. the rest is normalized (text_normalizer.h: NFC and kin, Prepend, Replace) and the
//      `normalized` added tokens (GPT-NeoX's whitespace runs) are split out of it the same way;
//   4. the pre-tokenizer cuts it into words (pre_tokenizer.h: ByteLevel, Split, Metaspace);
//   5. BPE merges by rank within each word (bpe_model.h), over bytes after a ByteLevel
//      pre-tokenizer, else over characters with byte fallback.
// The special tokens the post-processor declares around a text are prefix_ids/suffix_ids.
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
#include "analysis/tokenizer/pre_tokenizer.h"
#include "analysis/tokenizer/text_normalizer.h"
#include "analysis/tokenizer/tokenizer.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

class BpeTokenizer : public Tokenizer {
 public:
  // A Hugging Face tokenizer.json with model.type "BPE". Errors name the file and the
  // field: malformed JSON, a missing model.vocab or model.merges, an unsupported model,
  // normalizer, pre-tokenizer or post-processor type, a Split regex that does not compile.
  // Every factory reads its files through `gate`.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromTokenizerJson(
      const std::filesystem::path& tokenizer_json, const FileGate& gate);

  // A SentencePiece tokenizer.model (BPE: LLaMA, LLaMA-2, Mistral, TinyLlama, Amber),
  // converted as Hugging Face's LlamaConverter does (sentencepiece_model.h); <s> first.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromSentencePieceModel(
      const std::filesystem::path& tokenizer_model, const FileGate& gate);

  // GPT-2's vocab.json + merges.txt, configured as HF's GPT2TokenizerFast conversion:
  // no normalizer, ByteLevel without prefix space, <|endoftext|> a special added token.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromVocabAndMerges(
      const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
      const FileGate& gate);

  // Errors: a pre-tokenizer regex past its budget for this text (INVALID_ARGUMENT naming the
  // file and the pattern's field; regex_splitter.h).
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text) const override;
  int64_t vocab_size() const override { return vocab_size_; }

  // Id of a vocabulary token as the vocabulary spells it ("Ġthe", "▁the"), or of an added
  // token.
  std::optional<int64_t> TokenId(std::string_view token) const;

  // Special tokens the post-processor puts before and after a single text (LLaMA-2's <s>).
  const std::vector<int64_t>& prefix_ids() const { return prefix_ids_; }
  const std::vector<int64_t>& suffix_ids() const { return suffix_ids_; }

 private:
  BpeTokenizer() = default;

  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromConfig(
      internal::BpeConfig config);

  // Step 3 onwards on text that is free of non-normalized added tokens; `starts_text` when
  // it begins the encoded text.
  absl::Status EncodeNormalizable(std::string_view text, bool starts_text,
                                  internal::RegexBudget* budget, std::vector<int64_t>* ids) const;

  // The file(s) read, for messages.
  std::string source_;
  internal::TextNormalizer normalizer_;
  internal::PreTokenizer pre_tokenizer_;
  internal::AddedTokens raw_added_;
  internal::AddedTokens normalized_added_;
  std::vector<internal::AddedTokens::Token> all_added_;
  std::unique_ptr<internal::BpeModel> model_;
  int64_t vocab_size_ = 0;
  std::vector<int64_t> prefix_ids_;
  std::vector<int64_t> suffix_ids_;
};

}  // namespace anisoscope::analysis
