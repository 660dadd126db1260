// CheckpointMetrics: everything METRICS.md defines, for one checkpoint and one probe.
// Plain data, no LibTorch: the server includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/models/model_shape.h"

namespace anisoscope::analysis {

// Per block `layer` and head `head` (METRICS.md "Per block").
struct HeadMetrics {
  int layer = 0;
  int head = 0;
  double q_mean_norm = 0;
  double k_mean_norm = 0;
  double qk_mean_dot = 0;
  double qk_mean_cosine = 0;
  double attn_entropy = 0;
  double q_anisotropy = 0;
  double k_anisotropy = 0;
  std::vector<double> q_mean;  // length d_h
  std::vector<double> k_mean;
  // Rotary models only (empty otherwise): the means before the rotary embedding.
  std::vector<double> q_mean_pre_rotary;
  std::vector<double> k_mean_pre_rotary;
};

// Per hidden state index 0 … L (METRICS.md "Per hidden state").
struct HiddenStateMetrics {
  int index = 0;
  double anisotropy = 0;
  double mean_norm = 0;
};

struct CheckpointMetrics {
  ModelShape shape;
  int64_t num_samples = 0;
  int64_t num_tokens = 0;          // valid tokens
  std::vector<HeadMetrics> heads;  // layer-major, then head
  std::vector<HiddenStateMetrics> hidden_states;
  double seconds = 0;  // wall time of load + forward + metrics
};

// Scalar metric names, as stored and queried. Per-head metrics first.
const std::vector<std::string>& PerHeadMetricNames();
const std::vector<std::string>& PerHiddenStateMetricNames();
// Vector kinds: "q_mean", "k_mean", "q_mean_pre_rotary", "k_mean_pre_rotary" (the last
// two only for rotary models).
const std::vector<std::string>& VectorKinds();

// Calls `fn(name, layer, head, value)` for every scalar; head is -1 for hidden states,
// whose `layer` is the hidden-state index.
void ForEachScalar(
    const CheckpointMetrics& metrics,
    const std::function<void(std::string_view name, int layer, int head, double value)>& fn);

// Calls `fn(kind, layer, head, values)` for every stored vector (VectorKinds()), skipping
// the kinds a model does not have (pre-rotary means of non-rotary models).
void ForEachVector(const CheckpointMetrics& metrics,
                   const std::function<void(std::string_view kind, int layer, int head,
                                            const std::vector<double>& values)>& fn);

}  // namespace anisoscope::analysis
