// Probe: the fixed list of token-id samples run through every checkpoint of a job.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/tokenizer/tokenizer.h"
#include "analysis/tokenizer/wordpiece_tokenizer.h"
#include "common/file_gate.h"

namespace anisoscope::analysis {

// The token samples a job keeps when it does not say.
inline constexpr int64_t kDefaultTokenSamples = 128;

struct Probe {
  // Token ids per sample, unpadded; padding is added per batch by the extractor.
  std::vector<std::vector<int64_t>> samples;
  // Hash of the token ids (ComputeProbeId): results are stored per (run, probe).
  std::string id;
  // Human-readable origin, e.g. "text wiki.test.raw windows 128x512".
  std::string description;
  // M: the positions whose Q and K are kept per head (METRICS.md "Token samples"); 0: none.
  int64_t token_samples = kDefaultTokenSamples;
  // The metric groups computed over it (metric_groups.h); not part of the id.
  MetricGroups metric_groups = kAllMetricGroups;

  int64_t num_tokens() const;
  int64_t max_length() const;
};

enum class ProbeSource { kTokens, kText };
enum class TextMode { kWindows, kLines };

// What the user asked for; turned into a Probe per checkpoint (text needs its tokenizer).
struct ProbeSpec {
  ProbeSource source = ProbeSource::kTokens;
  // The token-id or text file. For kTokens with `token_ids` given, only its name is used
  // (for the description).
  std::filesystem::path file;
  // kTokens: the file's samples already read (e.g. sent to a worker by the server); empty:
  // read `file`.
  std::vector<std::vector<int64_t>> token_ids;
  TextMode mode = TextMode::kWindows;
  // Number of samples taken (the first ones); the paper uses 128.
  int64_t samples = 128;
  // Tokens per sample, special tokens included; 0 means the default, the smaller of
  // kDefaultSeqLen (analysis/extractor/extractor.h) and the model's maximum.
  int64_t seq_len = 0;
  // Probe::token_samples of the built probe.
  int64_t token_samples = kDefaultTokenSamples;
  // Probe::metric_groups of the built probe.
  MetricGroups metric_groups = kAllMetricGroups;
};

// "p" + 32 hex digits: the first 128 bits of SHA-256 over the sample count, then per sample
// its length and its ids, each as 8 little-endian bytes (probe_id.cc). A digest, so that
// two different probes cannot be made to share an id.
std::string ComputeProbeId(const std::vector<std::vector<int64_t>>& samples);

// The bytes a token file's line may spend per id (digits, separator, spaces): a line longer
// than this many per id its probe may still hold is refused unread.
inline constexpr int64_t kMaxBytesPerTokenId = 32;

// JSON lines, one array of token ids per line (blank lines ignored), used verbatim:
// the first `max_samples` lines, each truncated to `seq_len`. Errors name file and line.
// The file is opened through `gate`. The read stops with RESOURCE_EXHAUSTED once the
// samples read (each truncated) hold more than `max_tokens` ids, or at a line longer than
// kMaxBytesPerTokenId bytes per id still allowed: no line past the bound is read whole.
absl::StatusOr<Probe> ReadTokenProbe(const std::filesystem::path& file, int64_t max_samples,
                                     int64_t seq_len, const FileGate& gate,
                                     int64_t max_tokens = std::numeric_limits<int64_t>::max());
// The same probe from samples already read from `file`: the first `max_samples`, each
// truncated to `seq_len`. INVALID_ARGUMENT for no samples, an empty one or a negative id.
absl::StatusOr<Probe> TokenProbeFromIds(std::vector<std::vector<int64_t>> samples,
                                        const std::filesystem::path& file, int64_t max_samples,
                                        int64_t seq_len);

// Special tokens put around every text sample: BERT [CLS] … [SEP]; none for causal BPE
// models (GPT-2, GPT-NeoX), whose probes carry no special tokens by default.
struct SampleFraming {
  std::vector<int64_t> prefix;
  std::vector<int64_t> suffix;

  int64_t size() const { return static_cast<int64_t>(prefix.size() + suffix.size()); }
};

// [CLS] … [SEP] of `tokenizer`.
SampleFraming BertFraming(const WordPieceTokenizer& tokenizer);

// Tokenizes `file` with `tokenizer`; every sample is prefix + body + suffix of `framing`,
// body at most seq_len - framing.size() tokens (seq_len must leave room for the framing and
// one token); the first `max_samples` samples are kept.
// kWindows: tokenizer.Encode of the file's whole text as Python's open(file).read() gives it
// ("\r\n" and a lone "\r" read as "\n"; blank lines and whitespace kept, so byte-level BPE
// keeps its newline tokens), cut into consecutive bodies of seq_len - framing.size() ids, the
// last possibly shorter: the ids of tokenizer(open(f).read())["input_ids"] in Hugging Face,
// windowed. Only a prefix of a big file is read and encoded (text_stream.h). For WordPiece
// this equals encoding the file line by line, as probes did before.
// kLines: one sample per line that has tokens, each line encoded alone without its "\n" or
// "\r\n", truncated.
// `file` is opened through `gate`.
absl::StatusOr<Probe> BuildTextProbe(const std::filesystem::path& file, const Tokenizer& tokenizer,
                                     const SampleFraming& framing, TextMode mode,
                                     int64_t max_samples, int64_t seq_len, const FileGate& gate);

}  // namespace anisoscope::analysis
