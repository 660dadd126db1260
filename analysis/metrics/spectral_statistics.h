// The spectral statistics of one hidden state (METRICS.md "Second wave"), from the
// streamed second moments of its N valid vectors about a shift s: singular values of X
// (σ_i² are the eigenvalues of XᵀX), skewness, median, explained variance and IsoScore
// (from the centered covariance's trace and Frobenius norm). Moments about a shift near the
// mean keep the covariance accurate when the mean dwarfs the spread (anisotropic states).
// Pure functions; thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace anisoscope::analysis {

struct SpectralStatistics {
  std::vector<double> spectrum;  // σ_i / σ_1, i = 1 … min(N, d), descending
  double sv_skewness = 0;        // population skewness of the σ_i (scipy.stats.skew)
  double sv_median = 0;          // numpy median of σ_i / σ_1
  double ev_1 = 0;               // Σ_{i≤k} σ_i² / Σ_i σ_i², k = 1 and 10
  double ev_10 = 0;
  double isoscore = 0;  // Rudman et al. 2022
};

// shifted_gram [d, d] = Σ (x − s)(x − s)ᵀ, shifted_sum [d] = Σ (x − s), shift [d] = s:
// float64, any device; count: N. All zeros for N = 0.
SpectralStatistics ComputeSpectralStatistics(const at::Tensor& shifted_gram,
                                             const at::Tensor& shifted_sum, const at::Tensor& shift,
                                             int64_t count);

// IsoScore of a d x d covariance C (float64, CPU): ((tr C)² / ‖C‖_F² − 1) / (d − 1), which
// is METRICS.md's formula in its eigenvalues λ (Σλ = tr C, Σλ² = ‖C‖_F²) without solving
// for them.
double IsoScore(const at::Tensor& covariance);

}  // namespace anisoscope::analysis
