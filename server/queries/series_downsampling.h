// Min/max-preserving downsampling of query series (the HTTP API's and QuerySeries'
// max_points). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/types.h"

namespace anisoscope::server {

// Reduces every (layer, head) series of `points` (ordered by layer, head, step, as the
// store returns them) that has more than `max_points` points: the series is cut into
// max(1, max_points / 2) buckets of consecutive points of (nearly) equal count, each bucket
// keeps its minimum-value and maximum-value points (one when they coincide; NaN values
// are never chosen unless a bucket has nothing else), and the series' first and last
// points are always kept. Order is preserved. `max_points` <= 0 keeps everything.
// Returns true when some series was reduced.
bool DownsampleSeries(int max_points, std::vector<storage::SeriesPoint>* points);

// The most points DownsampleSeries keeps of one series of `points` points (for sizing an
// answer before it is read).
int64_t DownsampledSize(int64_t points, int max_points);

}  // namespace anisoscope::server
