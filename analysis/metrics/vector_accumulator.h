// VectorAccumulator: streaming mean and exact mean pairwise cosine of the valid vectors of
// G groups (heads, or one group for hidden states), in float64 on the model's device.
//
// For each group it keeps Σ x_t and Σ x_t/‖x_t‖ over valid tokens t, which is all the
// METRICS.md definitions need: mean = Σx/N and anisotropy = (‖Σ x̂‖² − N) / (N(N − 1)).
// A means-only accumulator (pre-rotary Q/K) skips the normalisation and Σ x̂.
// Not thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace anisoscope::analysis {

// Mean pairwise cosine (METRICS.md) of n vectors whose unit vectors sum to `unit_sum`
// [..., dim]: (‖Σ x̂‖² − n) / (n(n − 1)), over the last dimension; zeros when n < 2.
at::Tensor MeanPairwiseCosine(const at::Tensor& unit_sum, int64_t n);

class VectorAccumulator {
 public:
  // `with_anisotropy` false: only Mean() is available (Anisotropy() returns zeros).
  VectorAccumulator(int64_t groups, int64_t dim, const at::Device& device,
                    bool with_anisotropy = true);

  // x: [B, G, T, dim] (any float dtype); valid: [B, T] as float64 0/1 on the same device.
  // `valid_count` is valid.sum(), passed in to avoid a device sync.
  void Add(const at::Tensor& x, const at::Tensor& valid, int64_t valid_count);

  int64_t count() const { return count_; }
  // [G, dim] float64 on the device.
  at::Tensor Mean() const;
  // [G] float64: mean pairwise cosine; 0 when fewer than two vectors were added.
  at::Tensor Anisotropy() const;

 private:
  at::Tensor sum_;       // [G, dim]
  at::Tensor unit_sum_;  // [G, dim]; undefined for a means-only accumulator
  int64_t count_ = 0;
};

}  // namespace anisoscope::analysis
