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

double IsoScore(const std::vector<double>& lambda) {
  const double d = static_cast<double>(lambda.size());
  if (d < 2) return 0.0;
  double norm = 0;
  for (double value : lambda) norm += value * value;
  norm = std::sqrt(norm);
  if (norm == 0) return 0.0;
  double defect = 0;  // ‖λ̂ − 1‖² with λ̂ = √d λ / ‖λ‖
  for (double value : lambda) {
    const double normalized = std::sqrt(d) * value / norm;
    defect += (normalized - 1) * (normalized - 1);
  }
  const double delta_squared = defect / (2 * (d - std::sqrt(d)));
  const double k = d - delta_squared * (d - std::sqrt(d));
  return (k * k - d) / (d * (d - 1));
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
  result.isoscore = IsoScore(DescendingEigenvalues(covariance));
  return result;
}

}  // namespace anisoscope::analysis
