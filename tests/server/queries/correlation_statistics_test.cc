// The correlation tests and the isotropic baseline against scipy 1.10's values for the same
// input (stats.pearsonr, stats.spearmanr, 2 * special.betaincinv(a, a, 0.95) - 1).
#include "server/queries/correlation_statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace anisoscope::server {
namespace {

TEST(CorrelationStatisticsTest, PearsonAndSpearmanMatchScipy) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};
  const std::vector<double> y = {2, 1, 4, 3, 7, 5};
  const CorrelationTest pearson = PearsonTest(x, y);
  EXPECT_NEAR(pearson.coefficient, 0.7917946548886294, 1e-12);
  EXPECT_NEAR(pearson.p_value, 0.06051140336275671, 1e-12);
  const CorrelationTest spearman = SpearmanTest(x, y);
  EXPECT_NEAR(spearman.coefficient, 0.8285714285714287, 1e-12);
  EXPECT_NEAR(spearman.p_value, 0.04156268221574334, 1e-12);
}

TEST(CorrelationStatisticsTest, TiesTakeTheirAverageRank) {
  const CorrelationTest spearman = SpearmanTest({1, 2, 2, 3, 5}, {0.5, 0.7, 0.7, 0.2, 0.9});
  EXPECT_NEAR(spearman.coefficient, 0.36842105263157904, 1e-12);
  EXPECT_NEAR(spearman.p_value, 0.5417509057946893, 1e-12);
}

TEST(CorrelationStatisticsTest, DegenerateInputsAsScipy) {
  const CorrelationTest two = PearsonTest({1, 2}, {3, 1});
  EXPECT_EQ(two.coefficient, -1);
  EXPECT_EQ(two.p_value, 1);
  const CorrelationTest perfect = PearsonTest({1, 2, 3}, {2, 4, 6});
  EXPECT_EQ(perfect.coefficient, 1);
  EXPECT_EQ(perfect.p_value, 0);
  const CorrelationTest constant = PearsonTest({1, 1, 1}, {1, 2, 3});
  EXPECT_TRUE(std::isnan(constant.coefficient));
  EXPECT_TRUE(std::isnan(constant.p_value));
}

TEST(CorrelationStatisticsTest, IsotropicBaselineMatchesTheBetaQuantile) {
  EXPECT_NEAR(IsotropicCosineP95(2), 0.9876883405951378, 1e-12);
  EXPECT_NEAR(IsotropicCosineP95(16), 0.41236048101042444, 1e-12);
  EXPECT_NEAR(IsotropicCosineP95(64), 0.20582174864473401, 1e-12);
  EXPECT_NEAR(IsotropicCosineP95(768), 0.05935918997828771, 1e-12);
}

}  // namespace
}  // namespace anisoscope::server
