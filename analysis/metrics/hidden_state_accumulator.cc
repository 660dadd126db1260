#include "analysis/metrics/hidden_state_accumulator.h"

#include "analysis/metrics/gram_update.h"
#include "analysis/metrics/row_statistics.h"
#include "analysis/metrics/spectral_statistics.h"
#include "analysis/metrics/vector_accumulator.h"

namespace anisoscope::analysis {
namespace {

double Scalar(const at::Tensor& value) { return value.to(at::kCPU).item<double>(); }

}  // namespace

HiddenStateAccumulator::HiddenStateAccumulator(int64_t dim, const at::Device& device,
                                               MetricGroups groups)
    : groups_(groups) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kDouble).device(device);
  sum_ = at::zeros({dim}, options);
  unit_sum_ = at::zeros({dim}, options);
  if (Has(groups_, MetricGroup::kSpectra)) shifted_gram_ = at::zeros({dim, dim}, options);
  if (Has(groups_, MetricGroup::kUniformity)) {
    first_unit_sum_ = at::zeros({dim}, options);
    uniformity_sum_ = at::zeros({}, options);
  }
  if (Has(groups_, MetricGroup::kActivations)) {
    max_abs_ = at::zeros({}, options);
    median_abs_sum_ = at::zeros({}, options);
  }
}

void HiddenStateAccumulator::Add(const at::Tensor& hidden, const at::Tensor& valid,
                                 const std::vector<int64_t>& lengths, int64_t valid_count) {
  // Padded rows are 0 (a batch without padding is used as it is: one pass fewer).
  const bool padded = valid_count < hidden.size(0) * hidden.size(1);
  const at::Tensor x =
      padded ? hidden.to(at::kDouble) * valid.unsqueeze(-1) : hidden.to(at::kDouble);
  const int64_t dim = x.size(-1);
  const at::Tensor batch_sum = x.reshape({-1, dim}).sum(0);
  if (!shift_.defined() && valid_count > 0) shift_ = batch_sum / static_cast<double>(valid_count);
  sum_ += batch_sum;
  if (shift_.defined() && Has(groups_, MetricGroup::kSpectra)) {
    // float64 products: float32 ones (summed in float32 inside the BLAS) put the singular
    // values of a rank-deficient state (the embedding output of a probe with fewer distinct
    // tokens than d) at about sqrt(eps_float32) σ_1 = 2e-4 σ_1 instead of 0. Padded rows are 0.
    at::Tensor shifted = x - shift_;
    if (padded) shifted.mul_(valid.unsqueeze(-1));
    AddGram(shifted_gram_, shifted.reshape({-1, dim}));
  }
  // A zero vector has no direction: it adds 0 to Σ x̂ but still counts in N.
  const at::Tensor units =
      x / at::linalg_vector_norm(x, 2, {-1}, /*keepdim=*/true).clamp_min(1e-300);
  const at::Tensor sample_units = units.sum(1);  // [B, D]
  unit_sum_ += sample_units.sum(0);
  if (Has(groups_, MetricGroup::kUniformity)) {
    first_unit_sum_ += units.select(1, 0).sum(0);
    // TokenUni: u_s = (‖Σ_{t∈s} x̂_t‖² − n_s) / (n_s(n_s − 1)) for samples with n_s >= 2.
    const at::Tensor n =
        at::tensor(lengths, at::TensorOptions().dtype(at::kLong)).to(x.device(), at::kDouble);
    const at::Tensor u = (sample_units.pow(2).sum(-1) - n) / (n * (n - 1)).clamp_min(1);
    uniformity_sum_ += u.masked_fill(n < 2, 0).sum();
    for (int64_t length : lengths) uniformity_samples_ += length >= 2 ? 1 : 0;
  }
  if (Has(groups_, MetricGroup::kActivations)) {
    // max |x| from one min-max pass, without an |x| tensor.
    const auto [least, greatest] = at::aminmax(x);
    max_abs_ = at::maximum(max_abs_, at::maximum(greatest, least.neg()));
    median_abs_sum_ += MedianAbsSum(hidden, lengths);
  }
  count_ += valid_count;
  samples_ += static_cast<int64_t>(lengths.size());
}

HiddenStateMetrics HiddenStateAccumulator::Finish(int index) const {
  HiddenStateMetrics m;
  m.index = index;
  if (count_ == 0) return m;
  const double count = static_cast<double>(count_);
  m.anisotropy = Scalar(MeanPairwiseCosine(unit_sum_, count_));
  m.mean_norm = Scalar(at::linalg_vector_norm(sum_ / count, 2));
  if (Has(groups_, MetricGroup::kSpectra)) {
    const at::Tensor& shift = shift_;
    const SpectralStatistics spectral = ComputeSpectralStatistics(
        SymmetricGram(shifted_gram_), sum_ - count * shift, shift, count_);
    m.spectrum = spectral.spectrum;
    m.sv_skewness = spectral.sv_skewness;
    m.sv_median = spectral.sv_median;
    m.ev_1 = spectral.ev_1;
    m.ev_10 = spectral.ev_10;
    m.isoscore = spectral.isoscore;
  }
  if (Has(groups_, MetricGroup::kUniformity)) {
    m.token_uniformity = uniformity_samples_ > 0
                             ? Scalar(uniformity_sum_) / static_cast<double>(uniformity_samples_)
                             : 0.0;
    m.first_token_uniformity = Scalar(MeanPairwiseCosine(first_unit_sum_, samples_));
  }
  if (Has(groups_, MetricGroup::kActivations)) {
    m.max_abs = Scalar(max_abs_);
    m.median_abs = Scalar(median_abs_sum_) / count;
  }
  return m;
}

}  // namespace anisoscope::analysis
