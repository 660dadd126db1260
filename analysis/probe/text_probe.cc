// Text probes: a text file tokenized into [CLS] … [SEP] windows or lines.
#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "analysis/probe/probe.h"
#include "analysis/probe/probe_file.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// [CLS] + ids[begin, begin + count) + [SEP].
std::vector<int64_t> Wrap(const WordPieceTokenizer& tokenizer, const std::vector<int64_t>& ids,
                          size_t begin, size_t count) {
  std::vector<int64_t> sample;
  sample.reserve(count + 2);
  sample.push_back(tokenizer.cls_id());
  sample.insert(sample.end(), ids.begin() + begin, ids.begin() + begin + count);
  sample.push_back(tokenizer.sep_id());
  return sample;
}

// Consecutive windows of the file's token stream; reads only as many lines as it needs.
std::vector<std::vector<int64_t>> MakeWindows(std::ifstream& in,
                                              const WordPieceTokenizer& tokenizer,
                                              size_t max_samples, size_t body) {
  std::vector<std::vector<int64_t>> samples;
  std::vector<int64_t> pending;
  std::string line;
  while (samples.size() < max_samples && std::getline(in, line)) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::vector<int64_t> ids = tokenizer.Encode(line);
    pending.insert(pending.end(), ids.begin(), ids.end());
    size_t used = 0;
    while (pending.size() - used >= body && samples.size() < max_samples) {
      samples.push_back(Wrap(tokenizer, pending, used, body));
      used += body;
    }
    pending.erase(pending.begin(), pending.begin() + used);
  }
  if (samples.size() < max_samples && !pending.empty()) {
    samples.push_back(Wrap(tokenizer, pending, 0, pending.size()));
  }
  return samples;
}

// One sample per line that has tokens, each truncated to `body` tokens.
std::vector<std::vector<int64_t>> MakeLines(std::ifstream& in, const WordPieceTokenizer& tokenizer,
                                            size_t max_samples, size_t body) {
  std::vector<std::vector<int64_t>> samples;
  std::string line;
  while (samples.size() < max_samples && std::getline(in, line)) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::vector<int64_t> ids = tokenizer.Encode(line);
    // A line of only control or zero-width characters has no tokens: skipped as blank.
    if (ids.empty()) continue;
    samples.push_back(Wrap(tokenizer, ids, 0, std::min(ids.size(), body)));
  }
  return samples;
}

}  // namespace

absl::StatusOr<Probe> BuildTextProbe(const std::filesystem::path& file,
                                     const WordPieceTokenizer& tokenizer, TextMode mode,
                                     int64_t max_samples, int64_t seq_len) {
  // Room for [CLS], [SEP] and at least one token.
  RETURN_IF_ERROR(internal::CheckProbeLimits(file, max_samples, seq_len, 3));
  std::ifstream in;
  RETURN_IF_ERROR(internal::OpenProbeFile(file, &in));

  const auto body = static_cast<size_t>(seq_len - 2);
  const auto limit = static_cast<size_t>(max_samples);
  Probe probe;
  probe.samples = mode == TextMode::kWindows ? MakeWindows(in, tokenizer, limit, body)
                                             : MakeLines(in, tokenizer, limit, body);
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read probe file: ", file.string()));
  }
  if (probe.samples.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe file ", file.string(), " yields no tokens (empty or blank text)"));
  }
  probe.id = ComputeProbeId(probe.samples);
  probe.description = absl::StrCat("text ", file.filename().string(), " ",
                                   mode == TextMode::kWindows ? "windows " : "lines ",
                                   probe.samples.size(), "x", seq_len);
  return probe;
}

}  // namespace anisoscope::analysis
