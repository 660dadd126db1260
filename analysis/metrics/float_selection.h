// Order statistics of one row of floats, as numpy defines them (the median of an even count
// is the mean of the two middle values). Exact, no sort; two ways, the same values (where a
// row holds both -0 and +0, either may come out as a zero):
//
// - On a CPU with AVX-512 (float_selection_avx512.h), a sampled bracket: sixteen evenly
//   spaced values are ranked against each other in vector lanes, two of them bracket the
//   wanted rank, and one vector pass counts what lies below and keeps what lies within (a
//   compress per 16 values; a bracket that misses costs a second pass, keeping the side that
//   holds the rank); repeated until at most 32 values are left, which are ranked in lanes.
//   Ties that defeat the bracketing are left to std::nth_element. 2.7 to 6 times faster than
//   the radix selection on softmax rows of 128 to 768 (bench/selection_bench.cc).
// - Elsewhere, and for a row holding a NaN, a radix selection: the floats become
//   order-preserving unsigned keys, whose common leading bits are skipped, and the selection
//   narrows a byte at a time. 2 to 3.5 times faster than std::minmax_element and
//   std::nth_element.
#pragma once

#include <cstdint>
#include <vector>

namespace anisoscope::analysis {

struct RowSummary {
  double min = 0;
  double max = 0;
  double median = 0;
};

// Reused between calls by one thread: no allocation once it has grown.
struct SelectionScratch {
  std::vector<uint32_t> keys;
  std::vector<float> values;
};

// values[0 … n), n >= 1, any floats (NaNs sort last).
RowSummary SummarizeRow(const float* values, int64_t n, SelectionScratch& scratch);

// The same of |values[i]|, i < n.
RowSummary SummarizeAbsRow(const float* values, int64_t n, SelectionScratch& scratch);

// The radix selection alone, exposed so that the tests check both ways on every row.
RowSummary RadixSummarizeRow(const float* values, int64_t n, bool absolute,
                             SelectionScratch& scratch);

}  // namespace anisoscope::analysis
