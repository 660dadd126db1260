// Text probes: a text file tokenized into framed windows or lines.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "analysis/probe/probe.h"
#include "analysis/probe/probe_file.h"
#include "analysis/probe/text_stream.h"
#include "common/json_error.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {
namespace {

// The bytes of a line kept for a sample of `body` tokens: far more than `body` tokens need
// (a token is rarely over 16 bytes), so the sample is the whole line's first tokens, while
// a line of a gigabyte costs a megabyte.
size_t LineBytesKept(size_t body) { return std::max<size_t>(size_t{1} << 20, body * 64); }

// Next line of `in` without its "\n" or "\r\n" (wikitext-2 has CRLF line ends, and a
// byte-level BPE would otherwise encode the "\r"), at most its first `max_bytes` kept (cut
// at a UTF-8 character's start), the rest read past; for kLines. False at the end.
bool NextLine(std::istream& in, size_t max_bytes, std::string* line) {
  line->clear();
  std::streambuf* buffer = in.rdbuf();
  bool read = false;
  bool cut = false;
  for (int c = buffer->sbumpc(); c != std::char_traits<char>::eof(); c = buffer->sbumpc()) {
    read = true;
    if (c == '\n') break;
    if (line->size() < max_bytes) {
      line->push_back(static_cast<char>(c));
    } else {
      cut = true;
    }
  }
  if (!read) {
    in.setstate(std::ios::eofbit | std::ios::failbit);
    return false;
  }
  if (cut) {
    while (!line->empty() && (static_cast<unsigned char>(line->back()) & 0xC0) == 0x80) {
      line->pop_back();  // continuation bytes of the cut character
    }
    if (!line->empty() && static_cast<unsigned char>(line->back()) >= 0xC0) line->pop_back();
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return true;
}

// prefix + ids[begin, begin + count) + suffix.
std::vector<int64_t> Wrap(const SampleFraming& framing, const std::vector<int64_t>& ids,
                          size_t begin, size_t count) {
  std::vector<int64_t> sample;
  sample.reserve(count + framing.size());
  sample.insert(sample.end(), framing.prefix.begin(), framing.prefix.end());
  sample.insert(sample.end(), ids.begin() + begin, ids.begin() + begin + count);
  sample.insert(sample.end(), framing.suffix.begin(), framing.suffix.end());
  return sample;
}

// Consecutive windows of `body` ids of the whole text's token stream (text_stream.h).
absl::StatusOr<std::vector<std::vector<int64_t>>> MakeWindows(std::istream& in,
                                                              const Tokenizer& tokenizer,
                                                              const SampleFraming& framing,
                                                              size_t max_samples, size_t body) {
  const size_t max = std::numeric_limits<size_t>::max();
  const size_t count = max_samples > max / body ? max : max_samples * body;
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids,
                   internal::EncodeLeadingIds(in, tokenizer, count));
  std::vector<std::vector<int64_t>> samples;
  for (size_t begin = 0; begin < ids.size(); begin += body) {
    samples.push_back(Wrap(framing, ids, begin, std::min(body, ids.size() - begin)));
  }
  return samples;
}

// One sample per line that has tokens, each truncated to `body` tokens (and its text to
// LineBytesKept bytes as it is read).
absl::StatusOr<std::vector<std::vector<int64_t>>> MakeLines(std::istream& in,
                                                            const Tokenizer& tokenizer,
                                                            const SampleFraming& framing,
                                                            size_t max_samples, size_t body) {
  std::vector<std::vector<int64_t>> samples;
  std::string line;
  while (samples.size() < max_samples && NextLine(in, LineBytesKept(body), &line)) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    ASSIGN_OR_RETURN(const std::vector<int64_t> ids, tokenizer.Encode(line));
    // A line of only control or zero-width characters has no tokens: skipped as blank.
    if (ids.empty()) continue;
    samples.push_back(Wrap(framing, ids, 0, std::min(ids.size(), body)));
  }
  return samples;
}

}  // namespace

SampleFraming BertFraming(const WordPieceTokenizer& tokenizer) {
  return {{tokenizer.cls_id()}, {tokenizer.sep_id()}};
}

absl::StatusOr<Probe> BuildTextProbe(const std::filesystem::path& file, const Tokenizer& tokenizer,
                                     const SampleFraming& framing, TextMode mode,
                                     int64_t max_samples, int64_t seq_len, const FileGate& gate) {
  // Room for the framing and at least one token.
  RETURN_IF_ERROR(internal::CheckProbeLimits(file, max_samples, seq_len, framing.size() + 1));
  ASSIGN_OR_RETURN(const std::unique_ptr<internal::ProbeFile> opened,
                   internal::ProbeFile::Open(file, gate));
  std::istream& in = opened->stream();

  const auto body = static_cast<size_t>(seq_len - framing.size());
  const auto limit = static_cast<size_t>(max_samples);
  Probe probe;
  ASSIGN_OR_RETURN(probe.samples, mode == TextMode::kWindows
                                      ? MakeWindows(in, tokenizer, framing, limit, body)
                                      : MakeLines(in, tokenizer, framing, limit, body));
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
