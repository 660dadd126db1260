// The per-request limits that keep one client from hurting the others, in one place. Each
// refusal is RESOURCE_EXHAUSTED (HTTP 429) and names the limit and the flag that sets it.
// Beside them, fixed: gRPC messages of at most kMaxMessageBytes (common/message_limits.h)
// both ways, and HTTP request lines of at most 8 KiB (httplib: 414).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace anisoscope::server {

struct RequestLimits {
  // --max-series-points: points one series query may answer (after max_points
  // downsampling); about 65 bytes of JSON each.
  int64_t max_series_points = 2'000'000;
  // --max-watch-streams: WatchJob streams open at once, all callers together.
  int max_watch_streams = 1000;
};

// OK, or RESOURCE_EXHAUSTED when a series answer of `points` points passes the limit.
absl::Status CheckSeriesPoints(int64_t points, const RequestLimits& limits);

}  // namespace anisoscope::server
