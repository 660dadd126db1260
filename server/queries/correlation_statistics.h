// The statistics of the derived analyses (docs/metrics.md "Derived analyses"): correlation
// tests as scipy.stats.pearsonr / spearmanr define them and the isotropic cosine baseline,
// with Boost.Math's distributions. Pure; thread-safe.
#pragma once

#include <vector>

namespace anisoscope::server {

struct CorrelationTest {
  double coefficient = 0;  // r or rho; NaN when x or y is constant
  double p_value = 1;      // two-sided, Student's t with n - 2 degrees of freedom; NaN with r
};

// Pearson's r of `x` and `y` (equal sizes, n >= 2); n == 2 gives r = ±1 and p = 1 (scipy).
CorrelationTest PearsonTest(const std::vector<double>& x, const std::vector<double>& y);
// Spearman's rho: Pearson's r of the ranks, ties given their average rank.
CorrelationTest SpearmanTest(const std::vector<double>& x, const std::vector<double>& y);

// The 95th percentile of the cosine of two independent isotropic Gaussian vectors in R^d
// (d >= 2): (1 + cos) / 2 ~ Beta((d - 1) / 2, (d - 1) / 2).
double IsotropicCosineP95(int dimension);

}  // namespace anisoscope::server
