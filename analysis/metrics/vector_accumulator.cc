#include "analysis/metrics/vector_accumulator.h"

namespace anisoscope::analysis {

VectorAccumulator::VectorAccumulator(int64_t groups, int64_t dim, const at::Device& device,
                                     bool with_anisotropy)
    : sum_(at::zeros({groups, dim}, at::TensorOptions().dtype(at::kDouble).device(device))) {
  if (with_anisotropy) unit_sum_ = at::zeros_like(sum_);
}

void VectorAccumulator::Add(const at::Tensor& x, const at::Tensor& valid, int64_t valid_count) {
  const at::Tensor x64 = x.to(at::kDouble);
  const at::Tensor weight = valid.unsqueeze(1).unsqueeze(-1);  // [B, 1, T, 1]
  sum_ += (x64 * weight).sum(at::IntArrayRef{0, 2});
  count_ += valid_count;
  if (!unit_sum_.defined()) return;
  // A zero vector has no direction: it contributes 0 to Σ x̂ but still counts in N.
  const at::Tensor norms = at::linalg_vector_norm(x64, 2, {-1}, /*keepdim=*/true);
  const at::Tensor units = x64 / norms.clamp_min(1e-300);
  unit_sum_ += (units * weight).sum(at::IntArrayRef{0, 2});
}

at::Tensor VectorAccumulator::Mean() const {
  return count_ > 0 ? sum_ / static_cast<double>(count_) : at::zeros_like(sum_);
}

at::Tensor MeanPairwiseCosine(const at::Tensor& unit_sum, int64_t n) {
  if (n < 2) return at::zeros_like(unit_sum.select(-1, 0));
  const double count = static_cast<double>(n);
  return (unit_sum.pow(2).sum(-1) - count) / (count * (count - 1.0));
}

at::Tensor VectorAccumulator::Anisotropy() const {
  if (!unit_sum_.defined()) return at::zeros({sum_.size(0)}, sum_.options());
  return MeanPairwiseCosine(unit_sum_, count_);
}

}  // namespace anisoscope::analysis
