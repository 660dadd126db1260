// HiddenStateAccumulator: every per-hidden-state statistic of METRICS.md, streamed over the
// batches of a probe in float64 on the model's device: Σx and Σx̂ (mean, anisotropy), the
// second moments Σ (x − s)(x − s)ᵀ about the first batch's mean s (spectrum, IsoScore;
// about s so that they hold the spread and not the mean), per-sample Σx̂ (token
// uniformity), Σx̂ at position 0 (first-token uniformity), max |x| and Σ median |x|.
//
// Only the statistics of the groups it is given are accumulated (metric_groups.h): core
// (mean, anisotropy) always; spectra (the second moments), uniformity and activations
// when asked. Holds O(d²) state (O(d) without spectra), never a batch's activations past
// Add. Not thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_groups.h"

namespace anisoscope::analysis {

class HiddenStateAccumulator {
 public:
  HiddenStateAccumulator(int64_t dim, const at::Device& device,
                         MetricGroups groups = kAllMetricGroups);

  // hidden [B, T, D]; valid [B, T] float64 0/1; `lengths` [B] the samples' valid lengths
  // (right padding) and `valid_count` their sum, known on the host.
  void Add(const at::Tensor& hidden, const at::Tensor& valid, const std::vector<int64_t>& lengths,
           int64_t valid_count);

  // The statistics of everything added so far, as hidden state `index`; those of groups not
  // asked for are left 0 (the spectrum empty).
  HiddenStateMetrics Finish(int index) const;

 private:
  MetricGroups groups_;
  at::Tensor sum_;             // [D] Σ x
  at::Tensor unit_sum_;        // [D] Σ x̂
  at::Tensor shift_;           // [D] s: the first batch's mean; undefined before
  at::Tensor shifted_gram_;    // [D, D] Σ (x − s)(x − s)ᵀ, through AddGram (gram_update.h)
  at::Tensor first_unit_sum_;  // [D] Σ x̂ over position 0 of every sample
  at::Tensor uniformity_sum_;  // 0-dim: Σ u_s over samples with n_s >= 2
  at::Tensor max_abs_;         // 0-dim
  at::Tensor median_abs_sum_;  // 0-dim
  int64_t count_ = 0;
  int64_t samples_ = 0;
  int64_t uniformity_samples_ = 0;
};

}  // namespace anisoscope::analysis
