#include "server/jobs/probe_bounds.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/message_limits.h"

namespace anisoscope::server {

namespace pb = ::anisoscope::v1;

absl::Status CheckProbeRequest(const pb::ProbeSpec& probe, const RequestLimits& limits) {
  const int64_t samples = probe.samples() == 0 ? 128 : probe.samples();
  if (samples > limits.max_probe_tokens) {
    return CheckProbeTokens(samples, "at least", limits);  // a token per sample at least
  }
  if (probe.source() == pb::PROBE_SOURCE_TEXT && probe.seq_len() > 0) {
    const int64_t most = std::numeric_limits<int64_t>::max() / samples;
    const int64_t tokens =
        probe.seq_len() > most ? std::numeric_limits<int64_t>::max() : samples * probe.seq_len();
    return CheckProbeTokens(tokens, "up to (samples x seq_len)", limits);
  }
  return absl::OkStatus();
}

absl::Status CheckUnitProbe(const pb::UnitProbe& probe, int64_t max_tokens) {
  int64_t tokens = 0;
  for (const pb::TokenSample& sample : probe.tokens().samples()) tokens += sample.ids_size();
  RequestLimits limits;
  limits.max_probe_tokens = max_tokens;
  if (absl::Status status = CheckProbeTokens(tokens, "", limits); !status.ok()) return status;
  const int64_t bytes = static_cast<int64_t>(probe.ByteSizeLong()) + kUnitEnvelopeBytes;
  if (bytes <= kMaxMessageBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "each unit of this job would carry ", bytes, " bytes, more than the ", kMaxMessageBytes,
      " bytes a gRPC message may (its probe's token ids take ", probe.ByteSizeLong(),
      "); use fewer or shorter samples (--max-probe-tokens bounds them)"));
}

}  // namespace anisoscope::server
