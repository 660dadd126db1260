#include "server/wire/request_limits.h"

#include "absl/strings/str_cat.h"

namespace anisoscope::server {

absl::Status CheckSeriesPoints(int64_t points, const RequestLimits& limits) {
  if (points <= limits.max_series_points) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the series query matches ", points, " points, more than this server's limit of ",
      limits.max_series_points,
      " per query (--max-series-points); narrow it with layer, head, from_step/to_step or "
      "since_step, or pass max_points to downsample"));
}

absl::Status SeriesReadStopped(const RequestLimits& limits) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the series query matches more than ", limits.max_series_points,
      " points, this server's limit per query (--max-series-points); narrow it with layer, "
      "head, from_step/to_step or since_step"));
}

absl::Status CheckSeriesRead(int layer, int head, int64_t points, const RequestLimits& limits) {
  if (points <= limits.max_series_points) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("the series of layer ", layer, " head ", head, " matches ", points,
                   " points, more than this server's limit of ", limits.max_series_points,
                   " read per query (--max-series-points), even to downsample; narrow it with "
                   "from_step/to_step"));
}

absl::Status VectorBudget::Spend(int64_t values) {
  if (values <= left()) {
    spent_ += values;
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(
      absl::StrCat(what_, " matches at least ", spent_ + values,
                   " stored vector values, more than this server's limit of ", limit_,
                   " per query (--max-vector-values); narrow it with from_step/to_step"));
}

absl::Status CheckProbeTokens(int64_t tokens, const std::string& what,
                              const RequestLimits& limits) {
  if (tokens <= limits.max_probe_tokens) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("the probe holds ", what, what.empty() ? "" : " ", tokens,
                   " token ids, more than this server's limit of ", limits.max_probe_tokens,
                   " per job (--max-probe-tokens); use fewer samples or a shorter "
                   "seq_len"));
}

}  // namespace anisoscope::server
