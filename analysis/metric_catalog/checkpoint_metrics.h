// CheckpointMetrics: everything METRICS.md defines, for one checkpoint and one probe.
// Plain data, no LibTorch: the server includes it. The name lists below derive from the
// metric catalogue (metric_catalog.h), the one home of the stored metric and vector names.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/metric_catalog/metric_groups.h"
#include "analysis/models/model_shape.h"

namespace anisoscope::analysis {

// Per block `layer` and head `head` (METRICS.md "Per block", "Second wave").
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
  double attn_max_prob = 0;
  double attn_min_prob = 0;
  double attn_median_prob = 0;
  double attn_first_token_mass = 0;
  std::vector<double> q_mean;  // length d_h
  std::vector<double> k_mean;
  // Rotary models only (empty otherwise): the means before the rotary embedding.
  std::vector<double> q_mean_pre_rotary;
  std::vector<double> k_mean_pre_rotary;
  // Q and K at the probe's M sampled positions (TokenSampler), M x d_h row-major; empty
  // when the job keeps no token samples.
  std::vector<double> q_sample;
  std::vector<double> k_sample;
};

// Per hidden state index 0 … L (METRICS.md "Per hidden state", "Second wave").
struct HiddenStateMetrics {
  int index = 0;
  double anisotropy = 0;
  double mean_norm = 0;
  std::vector<double> spectrum;  // σ_i / σ_1, i = 1 … min(N, d)
  double sv_skewness = 0;
  double sv_median = 0;
  double ev_1 = 0;
  double ev_10 = 0;
  double isoscore = 0;
  double token_uniformity = 0;
  double first_token_uniformity = 0;
  double max_abs = 0;
  double median_abs = 0;
};

struct CheckpointMetrics {
  // The groups computed; the metrics of the others are 0 (vectors empty) and are neither
  // uploaded nor stored (ForEachScalar, ForEachVector skip them).
  MetricGroups groups = kAllMetricGroups;
  ModelShape shape;
  int64_t num_samples = 0;
  int64_t num_tokens = 0;          // valid tokens
  int64_t token_samples = 0;       // M of HeadMetrics::q_sample
  std::vector<HeadMetrics> heads;  // layer-major, then head
  std::vector<HiddenStateMetrics> hidden_states;
  // Per checkpoint, from the weights alone.
  double embed_partition_isotropy = 0;
  std::vector<double> final_norm_gain;
  double seconds = 0;       // wall time of load + forward + metrics
  std::string fingerprint;  // of the weight files (analysis/checkpoint/fingerprint.h)
};

// Where a stored metric or vector lives: its (layer, head) in storage is (l, h) per head,
// (index, -1) per hidden state and (-1, -1) per checkpoint. A per-block metric (l, -1) is
// derived at query time from the stored per-head vectors and never stored.
enum class MetricScope { kHead, kHiddenState, kCheckpoint, kBlock };

// Scalar metric names, as stored and queried.
const std::vector<std::string>& PerHeadMetricNames();
const std::vector<std::string>& PerHiddenStateMetricNames();
const std::vector<std::string>& PerCheckpointMetricNames();
// Derived per block from q_mean and k_mean: qk_mean_cosine_concat.
const std::vector<std::string>& PerBlockMetricNames();
// Vector kinds per head: q_mean, k_mean (always), q_mean_pre_rotary, k_mean_pre_rotary
// (rotary models), q_sample, k_sample (with token samples).
const std::vector<std::string>& PerHeadVectorKinds();
// The per-head kinds that are token samples (M x d_h each): q_sample, k_sample.
const std::vector<std::string>& TokenSampleKinds();
// hidden_spectrum.
const std::vector<std::string>& PerHiddenStateVectorKinds();
// final_norm_gain.
const std::vector<std::string>& PerCheckpointVectorKinds();
// Every vector kind: per head, then per hidden state, then per checkpoint.
const std::vector<std::string>& AllVectorKinds();

// True for the metrics and vector kinds whose METRICS.md definition is a ratio that is 0/0 in
// a degenerate case (a zero mean, fewer than two vectors, no sample of two tokens, equal or
// zero singular values, d = 1), so that another implementation may give NaN there (this
// engine gives 0): the cosines, anisotropies and uniformities, the spectrum and its
// statistics, IsoScore. Every other value is finite by definition, and no value is ±inf.
bool MayBeUndefined(std::string_view name);

// The scope of a scalar metric or of a vector kind; nullopt for an unknown name.
std::optional<MetricScope> ScopeOfMetric(std::string_view name);
std::optional<MetricScope> ScopeOfVectorKind(std::string_view kind);

// The group of a stored scalar metric or vector kind (metric_groups.h); kCore for the
// per-block and token-sample names and for an unknown name.
MetricGroup MetricGroupOf(std::string_view name);

// Calls `fn(name, layer, head, value)` for every scalar of `metrics.groups`, with
// (layer, head) as MetricScope says.
void ForEachScalar(
    const CheckpointMetrics& metrics,
    const std::function<void(std::string_view name, int layer, int head, double value)>& fn);

// Calls `fn(kind, layer, head, values)` for every stored vector of `metrics.groups`,
// skipping the empty ones (pre-rotary means of non-rotary models, token samples when none
// are kept).
void ForEachVector(const CheckpointMetrics& metrics,
                   const std::function<void(std::string_view kind, int layer, int head,
                                            const std::vector<double>& values)>& fn);

}  // namespace anisoscope::analysis
