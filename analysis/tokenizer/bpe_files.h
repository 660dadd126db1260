// Readers of BPE tokenizer files: Hugging Face tokenizer.json (byte-level as GPT-2, Pythia,
// Qwen, LLaMA-3, OLMo-2; with byte fallback as LLaMA-2, Mistral), and GPT-2's
// vocab.json + merges.txt. They only parse and check; BpeTokenizer builds the tokenizer
// from the result. Errors name the file and the field. Thread-safe.
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
#include "common/file_gate.h"

namespace anisoscope::analysis::internal {

// One step of a tokenizer.json normalizer (a Sequence is several, applied in order).
struct NormalizerStep {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kPrepend, kReplace };
  Kind kind = Kind::kNfc;
  // kPrepend: put before non-empty text; kReplace: the string replaced.
  std::string text;
  // kReplace: what replaces it.
  std::string replacement;
};

// One step of a tokenizer.json pre_tokenizer (a Sequence is several, applied in order).
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind = Kind::kSplit;
  // Where the step is in its file ("pre_tokenizer.pretokenizers[0]"), for messages.
  std::string field;
  // kSplit: the regex; every match and every gap is a word (behavior "Isolated").
  std::string pattern;
  // kByteLevel: a space before a word that has none; GPT-2's split pattern.
  bool add_prefix_space = false;
  bool use_regex = true;
  // kMetaspace: spaces become `replacement`, which is prepended as `prepend` says, and the
  // text is split before each one when `split`.
  std::string replacement = "\u2581";
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};

// Everything a BpeTokenizer is made of.
struct BpeConfig {
  // The file(s) read, for messages.
  std::string source;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  // Added tokens matched on the raw text (normalized: false) and on normalized text.
  std::vector<AddedTokens::Token> raw_added;
  std::vector<AddedTokens::Token> normalized_added;
  // BPE model.
  absl::flat_hash_map<std::string, int64_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::optional<std::string> unk_token;
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  // Special tokens the post_processor puts before and after a single text.
  std::vector<int64_t> prefix_ids;
  std::vector<int64_t> suffix_ids;
};

absl::StatusOr<BpeConfig> ReadTokenizerJson(const std::filesystem::path& file,
                                            const FileGate& gate);

// The bytes of a tokenizer file (at most 256 MiB), opened through `gate`; its error, or
// INVALID_ARGUMENT naming `what` and the path.
absl::StatusOr<std::string> ReadTokenizerFile(const std::filesystem::path& file,
                                              const std::string& what, const FileGate& gate);

absl::StatusOr<BpeConfig> ReadVocabAndMerges(const std::filesystem::path& vocab_json,
                                             const std::filesystem::path& merges_txt,
                                             const FileGate& gate);

}  // namespace anisoscope::analysis::internal
