#include "server/queries/correlation_statistics.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <boost/math/special_functions/beta.hpp>
#include <cmath>
#include <limits>
#include <numeric>

namespace anisoscope::server {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// 1-based ranks of `values`; tied values share the average of their ranks.
std::vector<double> AverageRanks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last + 1 < order.size() && values[order[last + 1]] == values[order[first]]) ++last;
    const double rank = (static_cast<double>(first + last) / 2) + 1;
    for (size_t i = first; i <= last; ++i) ranks[order[i]] = rank;
    first = last + 1;
  }
  return ranks;
}

double Mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace

CorrelationTest PearsonTest(const std::vector<double>& x, const std::vector<double>& y) {
  const double mean_x = Mean(x);
  const double mean_y = Mean(y);
  double xy = 0;
  double xx = 0;
  double yy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += (x[i] - mean_x) * (y[i] - mean_y);
    xx += (x[i] - mean_x) * (x[i] - mean_x);
    yy += (y[i] - mean_y) * (y[i] - mean_y);
  }
  if (xx == 0 || yy == 0) return {kNaN, kNaN};
  const double r = std::clamp(xy / std::sqrt(xx * yy), -1.0, 1.0);
  const double degrees = static_cast<double>(x.size()) - 2;
  if (degrees < 1) return {r, 1.0};
  if (std::abs(r) == 1) return {r, 0.0};
  const double t = r * std::sqrt(degrees / ((1 - r) * (1 + r)));
  const boost::math::students_t distribution(degrees);
  return {r, 2 * boost::math::cdf(boost::math::complement(distribution, std::abs(t)))};
}

CorrelationTest SpearmanTest(const std::vector<double>& x, const std::vector<double>& y) {
  return PearsonTest(AverageRanks(x), AverageRanks(y));
}

double IsotropicCosineP95(int dimension) {
  const double shape = (static_cast<double>(dimension) - 1) / 2;
  return 2 * boost::math::ibeta_inv(shape, shape, 0.95) - 1;
}

}  // namespace anisoscope::server
