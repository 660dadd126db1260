// MetricsObserver: a ForwardObserver that folds every batch of a probe into streaming
// float64 accumulators and, at the end, produces CheckpointMetrics (METRICS.md).
//
// Holds O(L · H · d_h) state on the model's device, never an attention matrix beyond the
// call that hands it over. Not thread-safe: one observer per forward loop.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "analysis/metrics/checkpoint_metrics.h"
#include "analysis/metrics/vector_accumulator.h"
#include "analysis/models/transformer_model.h"

namespace anisoscope::analysis {

class MetricsObserver : public ForwardObserver {
 public:
  MetricsObserver(const ModelShape& shape, const at::Device& device);

  // Call before each forward with that batch's validity mask [B, T] (bool, on device) and
  // its number of valid positions (known on the host: no device sync).
  void BeginBatch(const at::Tensor& valid, int64_t valid_count);

  void OnHiddenState(int index, const at::Tensor& hidden) override;
  void OnAttention(int layer, const at::Tensor& query, const at::Tensor& key,
                   const at::Tensor& probs) override;
  void OnPreRotary(int layer, const at::Tensor& query, const at::Tensor& key) override;

  // The metrics of everything added so far (copies results to the CPU once).
  CheckpointMetrics Finish() const;

 private:
  ModelShape shape_;
  at::Tensor valid_;  // [B, T] float64 0/1 of the current batch
  int64_t valid_count_ = 0;
  int64_t num_samples_ = 0;
  std::vector<VectorAccumulator> queries_;  // per layer, H groups
  std::vector<VectorAccumulator> keys_;
  std::vector<VectorAccumulator> pre_rotary_queries_;  // per layer; empty until OnPreRotary
  std::vector<VectorAccumulator> pre_rotary_keys_;
  std::vector<VectorAccumulator> hidden_;  // per hidden state, 1 group
  at::Tensor entropy_sum_;                 // [L, H] float64
};

}  // namespace anisoscope::analysis
