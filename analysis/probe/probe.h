// Probe: the fixed list of token-id samples run through every checkpoint of a job.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"

namespace anisoscope::analysis {

struct Probe {
  // Token ids per sample, unpadded; padding is added per batch by the extractor.
  std::vector<std::vector<int64_t>> samples;
  // Hash of the token ids (ComputeProbeId): results are stored per (run, probe).
  std::string id;
  // Human-readable origin, e.g. "text wiki.test.raw windows 128x512".
  std::string description;

  int64_t num_tokens() const;
  int64_t max_length() const;
};

enum class ProbeSource { kTokens, kText };
enum class TextMode { kWindows, kLines };

// What the user asked for; turned into a Probe per checkpoint (text needs its vocab.txt).
struct ProbeSpec {
  ProbeSource source = ProbeSource::kTokens;
  std::filesystem::path file;
  TextMode mode = TextMode::kWindows;
  // Number of samples taken (the first ones); the paper uses 128.
  int64_t samples = 128;
  // Tokens per sample, special tokens included; 0 means the model's maximum.
  int64_t seq_len = 0;
};

// "p" + 16 hex digits of a 64-bit FNV-1a over the sample count, lengths and ids.
std::string ComputeProbeId(const std::vector<std::vector<int64_t>>& samples);

// JSON lines, one array of token ids per line (blank lines ignored), used verbatim:
// the first `max_samples` lines, each truncated to `seq_len`. Errors name file and line.
absl::StatusOr<Probe> ReadTokenProbe(const std::filesystem::path& file, int64_t max_samples,
                                     int64_t seq_len);

// Tokenizes `file` with `tokenizer`. kWindows: consecutive windows of the token stream of
// the whole file, each [CLS] + (seq_len - 2) tokens + [SEP] (the last may be shorter).
// kLines: one sample per non-empty line, [CLS] … [SEP], truncated to seq_len.
absl::StatusOr<Probe> BuildTextProbe(const std::filesystem::path& file,
                                     const WordPieceTokenizer& tokenizer, TextMode mode,
                                     int64_t max_samples, int64_t seq_len);

}  // namespace anisoscope::analysis
