#include "server/jobs/unit_probe.h"

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "analysis/probe/probe.h"
#include "common/status_macros.h"
#include "server/jobs/probe_bounds.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

namespace {

// 60000 -> "60,000".
std::string WithThousands(int64_t n) {
  std::string digits =
      absl::StrCat(n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return n < 0 ? "-" + digits : digits;
}

// Whether each of the `num_samples` samples the worker ran has `length` tokens.
bool EverySampleHasLength(const pb::UnitProbe& unit, int64_t num_samples, int64_t length) {
  if (num_samples == 1) return true;
  if (unit.has_tokens()) {
    // The worker cuts the first samples to one common length: each must reach `length`.
    const auto& samples = unit.tokens().samples();
    if (num_samples > samples.size()) return false;
    for (int i = 0; i < num_samples; ++i) {
      if (samples[i].ids_size() < length) return false;
    }
    return true;
  }
  // A text sample holds at most seq_len tokens.
  return unit.seq_len() > 0 && length == unit.seq_len();
}

}  // namespace

absl::StatusOr<pb::UnitProbe> UnitProbeFromSpec(const storage::JobSpec& spec, const FileGate& files,
                                                int64_t max_tokens) {
  pb::UnitProbe probe;
  probe.set_samples(spec.samples);
  probe.set_seq_len(spec.seq_len);
  probe.set_token_samples(spec.token_samples);
  if (spec.metrics != "all") probe.set_metrics(spec.metrics);
  if (spec.probe_source == "tokens") {
    // Cut to seq_len when given; else untruncated: the worker cuts each sample to the
    // model's length, as it knows it.
    const int64_t seq_len = spec.seq_len > 0 ? spec.seq_len : std::numeric_limits<int64_t>::max();
    absl::StatusOr<analysis::Probe> tokens =
        analysis::ReadTokenProbe(spec.probe_path, spec.samples, seq_len, files, max_tokens);
    if (absl::IsResourceExhausted(tokens.status())) {
      return absl::ResourceExhaustedError(
          absl::StrCat(tokens.status().message(), " (--max-probe-tokens)"));
    }
    RETURN_IF_ERROR(tokens.status());
    pb::TokenProbe* out = probe.mutable_tokens();
    out->set_file_name(std::filesystem::path(spec.probe_path).filename().string());
    for (const std::vector<int64_t>& sample : tokens->samples) {
      out->add_samples()->mutable_ids()->Add(sample.begin(), sample.end());
    }
    RETURN_IF_ERROR(CheckUnitProbe(probe, max_tokens));
    return probe;
  }
  if (spec.probe_source != "text") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown probe source '", spec.probe_source, "'"));
  }
  pb::TextProbeSpec* text = probe.mutable_text();
  text->set_path(spec.probe_path);
  if (spec.probe_mode == "windows" || spec.probe_mode.empty()) {
    text->set_mode(pb::PROBE_MODE_WINDOWS);
  } else if (spec.probe_mode == "lines") {
    text->set_mode(pb::PROBE_MODE_LINES);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown probe mode '", spec.probe_mode, "'"));
  }
  return probe;
}

std::string ProbeLabel(const pb::UnitProbe& unit, int64_t num_samples, int64_t num_tokens) {
  std::string file;
  std::string noun = "sample";
  if (unit.has_tokens()) {
    file = unit.tokens().file_name();
  } else if (unit.has_text()) {
    file = std::filesystem::path(unit.text().path()).filename().string();
    noun = unit.text().mode() == pb::PROBE_MODE_LINES ? "line" : "window";
  }
  if (file.empty()) file = "probe";
  const int64_t length = num_samples > 0 ? num_tokens / num_samples : 0;
  if (num_samples > 0 && length > 0 && length * num_samples == num_tokens &&
      EverySampleHasLength(unit, num_samples, length)) {
    return absl::StrCat(file, " · ", WithThousands(num_samples),
                        unit.has_text() ? absl::StrCat(" ", noun, num_samples == 1 ? "" : "s") : "",
                        " x ", WithThousands(length));
  }
  return absl::StrCat(file, " · ", WithThousands(num_samples), " ", noun,
                      num_samples == 1 ? "" : "s", ", ", WithThousands(num_tokens), " tokens");
}

}  // namespace anisoscope::server
