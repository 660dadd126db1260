#include "server/queries/series_downsampling.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace anisoscope::server {
namespace {

// Appends to `keep` the indices (into `points`, ascending) that series [begin, end) keeps.
void DownsampleOne(const std::vector<storage::SeriesPoint>& points, size_t begin, size_t end,
                   size_t max_points, std::vector<size_t>* keep) {
  const size_t n = end - begin;
  const size_t buckets = std::max<size_t>(1, max_points / 2);
  const size_t first_kept = keep->size();
  keep->push_back(begin);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t lo = begin + b * n / buckets;
    const size_t hi = begin + (b + 1) * n / buckets;
    if (lo == hi) continue;
    size_t min_index = lo;
    size_t max_index = lo;
    for (size_t i = lo; i < hi; ++i) {
      const double value = points[i].value;
      if (std::isnan(value)) continue;
      if (std::isnan(points[min_index].value) || value < points[min_index].value) min_index = i;
      if (std::isnan(points[max_index].value) || value > points[max_index].value) max_index = i;
    }
    keep->push_back(std::min(min_index, max_index));
    keep->push_back(std::max(min_index, max_index));
  }
  keep->push_back(end - 1);
  // Indices are ascending bucket by bucket; drop the duplicates (first/last, min == max).
  keep->erase(std::unique(keep->begin() + static_cast<std::ptrdiff_t>(first_kept), keep->end()),
              keep->end());
}

}  // namespace

int64_t DownsampledSize(int64_t points, int max_points) {
  if (max_points <= 0 || points <= max_points) return points;
  const int64_t buckets = std::max(1, max_points / 2);
  return std::min(points, 2 * buckets + 2);  // first, last, and a minimum and maximum each
}

bool DownsampleSeries(int max_points, std::vector<storage::SeriesPoint>* points) {
  if (max_points <= 0) return false;
  const size_t limit = static_cast<size_t>(max_points);
  std::vector<size_t> keep;
  bool reduced = false;
  size_t begin = 0;
  while (begin < points->size()) {
    size_t end = begin + 1;
    while (end < points->size() && (*points)[end].layer == (*points)[begin].layer &&
           (*points)[end].head == (*points)[begin].head) {
      ++end;
    }
    if (end - begin > limit) {
      DownsampleOne(*points, begin, end, limit, &keep);
      reduced = true;
    } else {
      for (size_t i = begin; i < end; ++i) keep.push_back(i);
    }
    begin = end;
  }
  if (!reduced) return false;
  std::vector<storage::SeriesPoint> kept;
  kept.reserve(keep.size());
  for (size_t i : keep) kept.push_back((*points)[i]);
  *points = std::move(kept);
  return true;
}

}  // namespace anisoscope::server
