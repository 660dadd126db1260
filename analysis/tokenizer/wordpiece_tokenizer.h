// WordPieceTokenizer: Hugging Face BertTokenizer (BasicTokenizer + WordpieceTokenizer).
//
// Uncased mode lower-cases and strips accents (NFD, drop Mn); always: cleans control
// characters, splits on whitespace and punctuation, isolates CJK characters, greedy
// longest-match-first WordPiece with "##" continuations, [UNK] for words longer than
// max_input_chars_per_word or with no match. Immutable after Create; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/tokenizer/tokenizer.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

class WordPieceTokenizer : public Tokenizer {
 public:
  struct Options {
    // Lower-case and strip accents (bert-base-uncased, MultiBERTs).
    bool lower_case = true;
    // Words longer than this many code points become [UNK].
    int max_input_chars_per_word = 100;
  };

  // Reads a vocab.txt (one token per line, id = line number) through `gate`. Errors name
  // the file.
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> Create(
      const std::filesystem::path& vocab_file, const Options& options, const FileGate& gate);

  // Token ids of `text` (UTF-8; invalid bytes are dropped), without special tokens. Never
  // fails (no regex, linear in the text).
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text) const override;
  // The same as token strings, for tests and debugging.
  std::vector<std::string> Tokenize(std::string_view text) const;

  int64_t cls_id() const { return cls_id_; }
  int64_t sep_id() const { return sep_id_; }
  int64_t pad_id() const { return pad_id_; }
  int64_t unk_id() const { return unk_id_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }

 private:
  WordPieceTokenizer() = default;

  // Appends the ids of `text`, and its token strings when `tokens` is not null.
  void Run(std::string_view text, std::vector<int64_t>* ids,
           std::vector<std::string>* tokens) const;
  // Greedy longest-match-first pieces of one basic word ([UNK] if too long or unmatched).
  void AppendWordPieces(const std::string& word, std::vector<int64_t>* ids,
                        std::vector<std::string>* tokens) const;

  Options options_;
  std::unordered_map<std::string, int64_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  int64_t cls_id_ = -1;
  int64_t sep_id_ = -1;
  int64_t pad_id_ = -1;
  int64_t unk_id_ = -1;
  // Longest vocab entry in bytes: longer candidates are not looked up.
  size_t max_token_bytes_ = 0;
};

}  // namespace anisoscope::analysis
