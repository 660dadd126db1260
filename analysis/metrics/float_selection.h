// Order statistics of one row of floats, as numpy defines them (the median of an even count
// is the mean of the two middle values), by radix selection: the floats become
// order-preserving unsigned keys; one pass writes them and finds the least and greatest,
// whose common leading bits every key shares, so selection starts at the first bit that
// varies and narrows a byte at a time. Exact; 2 to 3.5 times faster than std::minmax_element
// and std::nth_element on the 128- to 768-long rows of the metrics.
#pragma once

#include <cstdint>
#include <vector>

namespace anisoscope::analysis {

struct RowSummary {
  double min = 0;
  double max = 0;
  double median = 0;
};

// values[0 … n), n >= 1, any floats (NaNs sort last); `scratch` is reused between calls (no
// allocation once it has grown).
RowSummary SummarizeRow(const float* values, int64_t n, std::vector<uint32_t>& scratch);

// The same of |values[i]|, i < n.
RowSummary SummarizeAbsRow(const float* values, int64_t n, std::vector<uint32_t>& scratch);

}  // namespace anisoscope::analysis
