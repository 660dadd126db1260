#include "server/request_limits.h"

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

}  // namespace anisoscope::server
