// MetricsObserver: a ForwardObserver that folds every batch of a probe into streaming
// float64 accumulators and, at the end, produces CheckpointMetrics (METRICS.md).
//
// Holds O(L · (H · d_h + d²) + L · H · M · d_h) state on the model's device (means, Gram
// matrices, M token samples), never an attention matrix beyond the call that hands it over.
// Not thread-safe: one observer per forward loop.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "analysis/metric_catalog/checkpoint_metrics.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/metrics/hidden_state_accumulator.h"
#include "analysis/metrics/token_sampler.h"
#include "analysis/metrics/vector_accumulator.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {

class MetricsObserver : public ForwardObserver {
 public:
  // `sample_lengths`: the probe's samples in probe order; `token_samples`: M, the Q and K
  // positions kept per head (0: none; at most the probe's tokens); `groups`: the metric
  // groups computed (the others are left 0 and CheckpointMetrics::groups says so).
  MetricsObserver(const ModelShape& shape, const at::Device& device,
                  const std::vector<int64_t>& sample_lengths, int64_t token_samples,
                  MetricGroups groups = kAllMetricGroups);

  // Call before each forward with that batch's validity mask [B, T] (bool, on device, right
  // padding), its number of valid positions (known on the host: no device sync) and the
  // probe samples of its rows.
  void BeginBatch(const at::Tensor& valid, int64_t valid_count, const std::vector<size_t>& samples);

  void OnHiddenState(int index, const at::Tensor& hidden) override;
  void OnAttention(int layer, const at::Tensor& query, const at::Tensor& key,
                   const at::Tensor& probs) override;
  void OnPreRotary(int layer, const at::Tensor& query, const at::Tensor& key) override;

  // The metrics of everything added so far (copies results to the CPU once).
  CheckpointMetrics Finish() const;

 private:
  // Copies the sampled positions of `vectors` [B, H, T, d_h] into `samples` [M, H, d_h].
  void KeepSamples(const at::Tensor& vectors, at::Tensor& samples) const;

  ModelShape shape_;
  MetricGroups groups_;
  std::vector<int64_t> sample_lengths_;
  TokenSampler sampler_;
  at::Tensor valid_;  // [B, T] float64 0/1 of the current batch
  int64_t valid_count_ = 0;
  std::vector<int64_t> lengths_;       // [B] of the current batch
  TokenSampler::Selection selection_;  // the current batch's sampled positions
  int64_t num_samples_ = 0;
  std::vector<VectorAccumulator> queries_;  // per layer, H groups
  std::vector<VectorAccumulator> keys_;
  std::vector<VectorAccumulator> pre_rotary_queries_;  // per layer; empty until OnPreRotary
  std::vector<VectorAccumulator> pre_rotary_keys_;
  std::vector<HiddenStateAccumulator> hidden_;  // per hidden state
  at::Tensor entropy_sum_;                      // [L, H] float64
  at::Tensor attention_sums_;  // [L, kNumAttentionStats, H] float64; with sharpness only
  std::vector<at::Tensor> query_samples_;       // per layer [M, H, d_h] float32
  std::vector<at::Tensor> key_samples_;
};

}  // namespace anisoscope::analysis
