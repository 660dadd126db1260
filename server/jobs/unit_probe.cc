#include "server/jobs/unit_probe.h"

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "analysis/probe/probe.h"
#include "common/status_macros.h"
#include "server/jobs/probe_bounds.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

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

}  // namespace anisoscope::server
