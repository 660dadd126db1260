// The benchmarks' synthetic run: 12 layers x 12 heads (head_dim 64) like BERT-base, steps
// 0, 20000, 40000, ...; every head metric, the hidden-state metrics and q_mean/k_mean
// vectors per step, with smooth made-up values. One metric's full series over 28 steps is
// 4032 points, about 260 KB of JSON.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "storage/metrics_store.h"

namespace anisoscope::bench {

inline constexpr int kSyntheticLayers = 12;
inline constexpr int kSyntheticHeads = 12;
inline constexpr int kSyntheticSteps = 28;
inline constexpr char kSyntheticRun[] = "bench";

// The training step of the `index`-th checkpoint: 0, 20000, 40000, ...
int64_t SyntheticStep(int index);

// Writes checkpoint `index` of run kSyntheticRun (probe "p0") to `store`.
absl::Status WriteSyntheticStep(storage::MetricsStore& store, int index);

}  // namespace anisoscope::bench
