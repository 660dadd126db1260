// Probe accessors and token-id probe files (JSON lines); probe ids are in probe_id.cc.
#include "analysis/probe/probe.h"

#include <algorithm>
#include <istream>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/probe/probe_file.h"
#include "analysis/probe/token_line.h"
#include "common/status_macros.h"

namespace anisoscope::analysis {

int64_t Probe::num_tokens() const {
  int64_t total = 0;
  for (const auto& sample : samples) total += static_cast<int64_t>(sample.size());
  return total;
}

int64_t Probe::max_length() const {
  size_t longest = 0;
  for (const auto& sample : samples) longest = std::max(longest, sample.size());
  return static_cast<int64_t>(longest);
}

namespace internal {

absl::Status CheckProbeLimits(const std::filesystem::path& file, int64_t max_samples,
                              int64_t seq_len, int64_t min_seq_len) {
  if (max_samples <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe ", file.string(), ": samples must be positive, got ", max_samples));
  }
  if (seq_len < min_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe ", file.string(), ": seq_len must be at least ", min_seq_len, ", got ", seq_len));
  }
  return absl::OkStatus();
}

ProbeFile::ProbeFile(UniqueFd fd)
    : buffer_(fd.release(), std::ios::in | std::ios::binary), stream_(&buffer_) {}

absl::StatusOr<std::unique_ptr<ProbeFile>> ProbeFile::Open(const std::filesystem::path& file,
                                                           const FileGate& gate) {
  absl::StatusOr<UniqueFd> fd = gate.OpenFile(file);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(), absl::StrCat("probe file: ", fd.status().message()));
  }
  return std::unique_ptr<ProbeFile>(new ProbeFile(*std::move(fd)));
}

}  // namespace internal

absl::StatusOr<Probe> ReadTokenProbe(const std::filesystem::path& file, int64_t max_samples,
                                     int64_t seq_len, const FileGate& gate, int64_t max_tokens) {
  RETURN_IF_ERROR(internal::CheckProbeLimits(file, max_samples, seq_len, 1));
  ASSIGN_OR_RETURN(const std::unique_ptr<internal::ProbeFile> opened,
                   internal::ProbeFile::Open(file, gate));
  std::istream& in = opened->stream();

  std::vector<std::vector<int64_t>> samples;
  int64_t tokens = 0;
  const auto too_many = [&](int64_t line_number) {
    return absl::ResourceExhaustedError(absl::StrCat(file.string(), " line ", line_number,
                                                     ": the probe's samples hold more than ",
                                                     max_tokens, " token ids, the most allowed"));
  };
  for (int64_t line_number = 1; static_cast<int64_t>(samples.size()) < max_samples; ++line_number) {
    const int64_t left = max_tokens - tokens;
    const int64_t max_bytes = left >= std::numeric_limits<int64_t>::max() / kMaxBytesPerTokenId - 1
                                  ? std::numeric_limits<int64_t>::max() - 1
                                  : kMaxBytesPerTokenId * (left + 1);
    // Kept as read: seq_len ids, and never more than one past the bound.
    const int64_t keep = left >= seq_len ? seq_len : left + 1;
    absl::StatusOr<internal::TokenLine> line =
        internal::ReadTokenLine(*in.rdbuf(), keep, max_bytes);
    if (!line.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.string(), " line ", line_number, ": ", line.status().message()));
    }
    using Kind = internal::TokenLine::Kind;
    if (line->kind == Kind::kEnd) break;
    if (line->kind == Kind::kTooLong) return too_many(line_number);
    if (line->kind == Kind::kBlank) continue;
    tokens += std::min(line->count, seq_len);
    if (tokens > max_tokens) return too_many(line_number);
    samples.push_back(std::move(line->ids));
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read probe file: ", file.string()));
  }
  return TokenProbeFromIds(std::move(samples), file, max_samples, seq_len);
}

absl::StatusOr<Probe> TokenProbeFromIds(std::vector<std::vector<int64_t>> samples,
                                        const std::filesystem::path& file, int64_t max_samples,
                                        int64_t seq_len) {
  RETURN_IF_ERROR(internal::CheckProbeLimits(file, max_samples, seq_len, 1));
  if (samples.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe file ", file.string(), " has no samples (empty or blank lines only)"));
  }
  if (static_cast<int64_t>(samples.size()) > max_samples) samples.resize(max_samples);
  for (size_t s = 0; s < samples.size(); ++s) {
    std::vector<int64_t>& ids = samples[s];
    if (ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe file ", file.string(), ": sample ", s, " is empty"));
    }
    for (size_t t = 0; t < ids.size(); ++t) {
      if (ids[t] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("probe file ", file.string(), ": sample ",
                                                       s, " token ", t, " is negative"));
      }
    }
    if (static_cast<int64_t>(ids.size()) > seq_len) ids.resize(seq_len);
  }
  Probe probe;
  probe.samples = std::move(samples);
  probe.id = ComputeProbeId(probe.samples);
  probe.description =
      absl::StrCat("tokens ", file.filename().string(), " ", probe.samples.size(), " samples");
  return probe;
}

}  // namespace anisoscope::analysis
