// Both selections (the AVX-512 one where this CPU has it, and the radix one) against numpy's
// definitions computed by sorting: odd and even counts, ties, negatives, signed zeros,
// infinities, NaNs, values that differ in their last bit only, rows long enough to need every
// byte of a key and every round of the bracketing, and rows whose bracket misses its rank.
#include "analysis/metrics/float_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "analysis/metrics/float_selection_avx512.h"

namespace anisoscope::analysis {
namespace {

// numpy's min, max and median, NaNs sorting last.
RowSummary Sorted(std::vector<float> values) {
  std::sort(values.begin(), values.end(),
            [](float a, float b) { return std::isnan(b) ? !std::isnan(a) : a < b; });
  const size_t n = values.size();
  const double median =
      n % 2 == 1 ? values[n / 2] : 0.5 * (static_cast<double>(values[n / 2 - 1]) + values[n / 2]);
  return {values.front(), values.back(), median};
}

std::vector<float> Absolute(std::vector<float> values) {
  for (float& value : values) value = std::abs(value);
  return values;
}

void ExpectSame(double actual, double expected, const char* what, size_t n) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << what << ", n = " << n;
  } else {
    EXPECT_EQ(actual, expected) << what << ", n = " << n;
  }
}

void ExpectEqual(const RowSummary& actual, const RowSummary& expected, size_t n) {
  ExpectSame(actual.min, expected.min, "min", n);
  ExpectSame(actual.max, expected.max, "max", n);
  ExpectSame(actual.median, expected.median, "median", n);
}

// The public functions (whichever way this CPU takes), the radix way, and the AVX-512 way
// where it runs (it declines a row holding a NaN).
void ExpectBothSummaries(const std::vector<float>& values, SelectionScratch& scratch) {
  const int64_t n = static_cast<int64_t>(values.size());
  for (const bool absolute : {false, true}) {
    const RowSummary expected = Sorted(absolute ? Absolute(values) : values);
    ExpectEqual(absolute ? SummarizeAbsRow(values.data(), n, scratch)
                         : SummarizeRow(values.data(), n, scratch),
                expected, values.size());
    ExpectEqual(RadixSummarizeRow(values.data(), n, absolute, scratch), expected, values.size());
    if (!Avx512SelectionAvailable()) continue;
    const std::optional<RowSummary> vectorized =
        Avx512SummarizeRow(values.data(), n, absolute, scratch.values);
    const bool has_nan =
        std::any_of(values.begin(), values.end(), [](float v) { return std::isnan(v); });
    EXPECT_EQ(vectorized.has_value(), !has_nan) << "n = " << n;
    if (vectorized) ExpectEqual(*vectorized, expected, values.size());
  }
}

TEST(FloatSelectionTest, MatchesSortingOnRandomRows) {
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(-3, 3);  // many ties
  std::uniform_real_distribution<float> near_uniform(1.0f / 512 - 1e-6f, 1.0f / 512 + 1e-6f);
  SelectionScratch scratch;
  for (int64_t n : {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 34, 127, 128, 512, 768, 1001}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> values(static_cast<size_t>(n));
      for (float& value : values) {
        switch (trial % 4) {
          case 0:
            value = normal(random);
            break;
          case 1:
            value = static_cast<float>(small(random));
            break;
          case 2:
            value = near_uniform(random);  // an untrained head's attention row
            break;
          default:
            value = std::exp(4.0f * normal(random));  // a trained head's: a few large weights
        }
      }
      ExpectBothSummaries(values, scratch);
    }
  }
}

TEST(FloatSelectionTest, ProbabilityRowsAndTheirExtremes) {
  SelectionScratch scratch;
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float inf = std::numeric_limits<float>::infinity();
  ExpectBothSummaries({0.25f, 0.0f, 0.75f, 0.0f}, scratch);
  ExpectBothSummaries({1e-30f, tiny, 0.5f, 0.5f - 1e-8f, 1e-30f}, scratch);
  ExpectBothSummaries({-0.0f, 0.0f, -0.0f}, scratch);
  ExpectBothSummaries({-inf, inf, 1.0f, -2.0f}, scratch);
  ExpectBothSummaries({-1.0f, -1.0f, -1.0f, 2.0f}, scratch);
  ExpectBothSummaries({0.5f, 0.5f, 0.5f, 0.5f}, scratch);
  ExpectBothSummaries({1.0f, std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f), 1.0f},
                      scratch);
}

// The AVX-512 way brackets the middle between two of 16 evenly spaced values: rows where those
// values are the largest or the smallest (the bracket misses low or high), and rows of two
// values where it holds every value (no progress, finished by std::nth_element).
TEST(FloatSelectionTest, BracketsThatMissTheirRank) {
  SelectionScratch scratch;
  for (int64_t n : {33, 64, 100, 512, 768}) {
    for (const float sign : {1.0f, -1.0f}) {
      std::vector<float> values(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) values[static_cast<size_t>(j)] = static_cast<float>(j);
      for (int64_t j = 0; j < 16; ++j) {
        values[static_cast<size_t>(j * n / 16)] = sign * (1000.0f + static_cast<float>(j));
      }
      ExpectBothSummaries(values, scratch);
    }
    std::vector<float> two_values(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
      two_values[static_cast<size_t>(j)] = (j % 3 == 0) ? 0.5f : 0.25f;
    ExpectBothSummaries(two_values, scratch);
  }
}

TEST(FloatSelectionTest, NansSortLast) {
  SelectionScratch scratch;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ExpectBothSummaries({1.0f, nan, 2.0f}, scratch);
  ExpectBothSummaries({nan, 3.0f, nan, -1.0f}, scratch);
  ExpectBothSummaries({nan}, scratch);
  std::vector<float> long_row(512);
  for (size_t j = 0; j < long_row.size(); ++j) long_row[j] = std::sin(static_cast<float>(j));
  long_row[100] = nan;
  ExpectBothSummaries(long_row, scratch);
}

}  // namespace
}  // namespace anisoscope::analysis
