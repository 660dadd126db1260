#include "analysis/metrics/spectral_statistics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace anisoscope::analysis {
namespace {

// Eigenvalues of the symmetric `matrix`, descending, negatives (round-off) clamped to 0.
std::vector<double> DescendingEigenvalues(const at::Tensor& matrix) {
  const at::Tensor values = at::linalg_eigvalsh(matrix.to(at::kCPU)).contiguous();
  std::vector<double> result(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  std::sort(result.begin(), result.end(), std::greater<double>());
  for (double& value : result) value = std::max(value, 0.0);
  return result;
}

double Mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double Skewness(const std::vector<double>& values) {
  const double mean = Mean(values);
  double m2 = 0, m3 = 0;
  for (double v : values) {
    m2 += (v - mean) * (v - mean);
    m3 += (v - mean) * (v - mean) * (v - mean);
  }
  m2 /= static_cast<double>(values.size());
  m3 /= static_cast<double>(values.size());
  return m2 > 0 ? m3 / std::pow(m2, 1.5) : 0.0;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// EV_k = Σ_{i≤k} σ_i² / Σ_i σ_i² (k capped at the number of values).
double ExplainedVariance(const std::vector<double>& squared, size_t k) {
  const double total = std::accumulate(squared.begin(), squared.end(), 0.0);
  const double top =
      std::accumulate(squared.begin(), squared.begin() + std::min(k, squared.size()), 0.0);
  return total > 0 ? top / total : 0.0;
}

}  // namespace

double IsoScore(const at::Tensor& covariance) {
  const double d = static_cast<double>(covariance.size(0));
  const double frobenius_squared = covariance.pow(2).sum().item<double>();
  if (d < 2 || frobenius_squared == 0) return 0.0;
  // With λ̂ = √d λ / ‖λ‖: ‖λ̂ − 1‖² = 2d − 2√d Σλ / ‖λ‖, so d − δ²(d − √d) = √d Σλ / ‖λ‖,
  // and Σλ = tr C, ‖λ‖² = ‖C‖_F²: the score needs no eigenvalues.
  const double trace = covariance.trace().item<double>();
  return (trace * trace / frobenius_squared - 1) / (d - 1);
}

SpectralStatistics ComputeSpectralStatistics(const at::Tensor& shifted_gram,
                                             const at::Tensor& shifted_sum, const at::Tensor& shift,
                                             int64_t count) {
  SpectralStatistics result;
  if (count == 0) return result;
  const double n = static_cast<double>(count);
  const at::Tensor moments = shifted_gram.to(at::kCPU, at::kDouble);
  const at::Tensor y = shifted_sum.to(at::kCPU, at::kDouble);
  const at::Tensor s = shift.to(at::kCPU, at::kDouble);
  // XᵀX = Σ (y + s)(y + s)ᵀ with y = x − s.
  const at::Tensor cross = at::outer(y, s);
  const at::Tensor gram = moments + cross + cross.t() + n * at::outer(s, s);
  const std::vector<double> eigenvalues = DescendingEigenvalues(gram);
  const size_t rank = std::min(eigenvalues.size(), static_cast<size_t>(count));
  const std::vector<double> squared(eigenvalues.begin(), eigenvalues.begin() + rank);
  std::vector<double> sigma(rank);
  std::transform(squared.begin(), squared.end(), sigma.begin(),
                 [](double v) { return std::sqrt(v); });
  result.spectrum.resize(rank);
  for (size_t i = 0; i < rank; ++i) result.spectrum[i] = sigma[0] > 0 ? sigma[i] / sigma[0] : 0.0;
  result.sv_skewness = Skewness(sigma);
  result.sv_median = Median(result.spectrum);
  result.ev_1 = ExplainedVariance(squared, 1);
  result.ev_10 = ExplainedVariance(squared, 10);
  const at::Tensor covariance = moments - at::outer(y, y) / n;  // N times the covariance
  result.isoscore = IsoScore(covariance);
  return result;
}

}  // namespace anisoscope::analysis
