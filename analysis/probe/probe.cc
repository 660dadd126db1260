// Probe ids, Probe accessors and token-id probe files (JSON lines).
#include "analysis/probe/probe.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "analysis/probe/probe_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace anisoscope::analysis {
namespace {

constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ULL;
constexpr uint64_t kFnvPrime = 1099511628211ULL;

// FNV-1a over the 8 little-endian bytes of `value`.
void HashInt64(int64_t value, uint64_t* hash) {
  const auto bits = static_cast<uint64_t>(value);
  for (int byte = 0; byte < 8; ++byte) {
    *hash ^= (bits >> (8 * byte)) & 0xFF;
    *hash *= kFnvPrime;
  }
}

// The ids of one JSON line, or INVALID_ARGUMENT prefixed by `where` ("file line N").
absl::StatusOr<std::vector<int64_t>> ParseIdLine(std::string_view line, const std::string& where) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for 1e999
    return absl::InvalidArgumentError(absl::StrCat(where, ": not valid JSON (", e.what(), ")"));
  }
  if (!value.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a JSON array of token ids, got ", value.type_name()));
  }
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": empty array"));
  std::vector<int64_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& element = value[i];
    const bool ok =
        (element.is_number_unsigned() &&
         element.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) ||
        (element.is_number_integer() && !element.is_number_unsigned() &&
         element.get<int64_t>() >= 0);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": element ", i, " is not a non-negative integer (got ", element.dump(), ")"));
    }
    ids.push_back(element.get<int64_t>());
  }
  return ids;
}

}  // namespace

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

// Hashed as int64 little-endian: the sample count, then per sample its length and its ids.
std::string ComputeProbeId(const std::vector<std::vector<int64_t>>& samples) {
  uint64_t hash = kFnvOffsetBasis;
  HashInt64(static_cast<int64_t>(samples.size()), &hash);
  for (const auto& sample : samples) {
    HashInt64(static_cast<int64_t>(sample.size()), &hash);
    for (const int64_t id : sample) HashInt64(id, &hash);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return absl::StrCat("p", hex);
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

absl::Status OpenProbeFile(const std::filesystem::path& file, std::ifstream* in) {
  std::error_code error;
  if (!std::filesystem::exists(file, error)) {
    return absl::NotFoundError(absl::StrCat("probe file not found: ", file.string()));
  }
  if (std::filesystem::is_directory(file, error)) {
    return absl::InvalidArgumentError(absl::StrCat("probe file is a directory: ", file.string()));
  }
  in->open(file, std::ios::binary);
  if (!*in) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open probe file: ", file.string()));
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<Probe> ReadTokenProbe(const std::filesystem::path& file, int64_t max_samples,
                                     int64_t seq_len) {
  RETURN_IF_ERROR(internal::CheckProbeLimits(file, max_samples, seq_len, 1));
  std::ifstream in;
  RETURN_IF_ERROR(internal::OpenProbeFile(file, &in));

  std::vector<std::vector<int64_t>> samples;
  std::string line;
  for (int64_t line_number = 1;
       static_cast<int64_t>(samples.size()) < max_samples && std::getline(in, line);
       ++line_number) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                     ParseIdLine(line, absl::StrCat(file.string(), " line ", line_number)));
    samples.push_back(std::move(ids));
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
