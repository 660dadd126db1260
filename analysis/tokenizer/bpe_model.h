// BpeModel: Hugging Face tokenizers' BPE model: a vocabulary and a rank-ordered merge list,
// applied lowest rank first (leftmost first on ties) exactly as tokenizers' Word::merge_all,
// over the characters of a word: byte-level words (GPT-2 style, each byte a character) or
// plain UTF-8 words with byte fallback (LLaMA-2 style). A bounded per-word cache makes
// repeated words cheap.
// Immutable after Create apart from the cache, which is guarded: thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace anisoscope::analysis::internal {

class BpeModel {
 public:
  struct Options {
    // Id for a symbol missing from the vocabulary; unset drops such symbols (as HF).
    std::optional<int64_t> unk_id;
    // A word that is itself in the vocabulary is one token without merging (HF ignore_merges).
    bool ignore_merges = false;
    // A character missing from the vocabulary becomes the <0xAB> tokens of its bytes when
    // they all are in it (HF byte_fallback), else unk.
    bool byte_fallback = false;
    // Consecutive unk characters become one unk (HF fuse_unk).
    bool fuse_unk = false;
    // Words remembered by the cache; 0 disables it.
    size_t cache_capacity = 1 << 16;
  };

  // `merges` are pairs of vocabulary tokens in rank order; each pair, and its
  // concatenation, must be in `vocab`. Errors say which merge (by index) is bad;
  // the caller adds the file name.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(
      absl::flat_hash_map<std::string, int64_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, const Options& options);

  // Appends the ids of one pre-tokenized word given as raw bytes (mapped through
  // ByteToUnicode here).
  void EncodeByteLevelWord(std::string_view word_bytes, std::vector<int64_t>* ids) const;
  // Appends the ids of one pre-tokenized word of valid UTF-8, character by character.
  void EncodeWord(std::string_view word, std::vector<int64_t>* ids) const;

  // Id of `token` (in byte-to-unicode form), if in the vocabulary.
  std::optional<int64_t> TokenId(std::string_view token) const;
  // One more than the largest vocabulary id.
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Merge {
    int32_t rank;
    int64_t new_id;
  };

  BpeModel() = default;

  // The cache in front of `encode`, which appends a word's ids.
  template <typename Encode>
  void Cached(std::string_view word, bool byte_level, const Encode& encode,
              std::vector<int64_t>* ids) const;
  // A word's symbols before merging.
  std::vector<int64_t> ByteLevelSymbols(std::string_view word_bytes) const;
  std::vector<int64_t> CharacterSymbols(std::string_view word) const;
  // Merges `symbols` and appends the result.
  void MergeSymbols(const std::vector<int64_t>& symbols, std::vector<int64_t>* ids) const;
  const Merge* FindMerge(int64_t left, int64_t right) const;

  Options options_;
  absl::flat_hash_map<std::string, int64_t> vocab_;
  // Key: left id << 32 | right id.
  absl::flat_hash_map<uint64_t, Merge> merges_;
  // Vocabulary id of each byte's unicode stand-in; -1 when absent.
  std::array<int64_t, 256> byte_ids_{};
  int64_t vocab_size_ = 0;

  mutable std::mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace anisoscope::analysis::internal
