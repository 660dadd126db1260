// The radix selection against numpy's definitions computed by sorting: odd and even counts,
// ties, negatives, signed zeros, infinities, keys that differ in their last bit only, and
// rows long enough to need every byte.
#include "analysis/metrics/float_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace anisoscope::analysis {
namespace {

RowSummary Sorted(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median =
      n % 2 == 1 ? values[n / 2] : 0.5 * (static_cast<double>(values[n / 2 - 1]) + values[n / 2]);
  return {values.front(), values.back(), median};
}

std::vector<float> Absolute(std::vector<float> values) {
  for (float& value : values) value = std::abs(value);
  return values;
}

void ExpectEqual(const RowSummary& actual, const RowSummary& expected, size_t n) {
  EXPECT_EQ(actual.min, expected.min) << "n = " << n;
  EXPECT_EQ(actual.max, expected.max) << "n = " << n;
  EXPECT_EQ(actual.median, expected.median) << "n = " << n;
}

void ExpectBothSummaries(const std::vector<float>& values, std::vector<uint32_t>& scratch) {
  const int64_t n = static_cast<int64_t>(values.size());
  ExpectEqual(SummarizeRow(values.data(), n, scratch), Sorted(values), values.size());
  ExpectEqual(SummarizeAbsRow(values.data(), n, scratch), Sorted(Absolute(values)), values.size());
}

TEST(FloatSelectionTest, MatchesSortingOnRandomRows) {
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(-3, 3);  // many ties
  std::uniform_real_distribution<float> near_uniform(1.0f / 512 - 1e-6f, 1.0f / 512 + 1e-6f);
  std::vector<uint32_t> scratch;
  for (int64_t n : {1, 2, 3, 4, 7, 8, 127, 128, 512, 768, 1001}) {
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<float> values(static_cast<size_t>(n));
      for (float& value : values) {
        switch (trial % 3) {
          case 0:
            value = normal(random);
            break;
          case 1:
            value = static_cast<float>(small(random));
            break;
          default:
            value = near_uniform(random);  // an untrained head's attention row
        }
      }
      ExpectBothSummaries(values, scratch);
    }
  }
}

TEST(FloatSelectionTest, ProbabilityRowsAndTheirExtremes) {
  std::vector<uint32_t> scratch;
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

}  // namespace
}  // namespace anisoscope::analysis
