#include "analysis/metrics/checkpoint_metrics.h"

#include <algorithm>

namespace anisoscope::analysis {
namespace {

template <typename Metrics, typename Value>
struct Field {
  const char* name;
  Value Metrics::*member;
};

using HeadScalar = Field<HeadMetrics, double>;
using HeadVector = Field<HeadMetrics, std::vector<double>>;
using HiddenScalar = Field<HiddenStateMetrics, double>;
using HiddenVector = Field<HiddenStateMetrics, std::vector<double>>;
using CheckpointScalar = Field<CheckpointMetrics, double>;
using CheckpointVector = Field<CheckpointMetrics, std::vector<double>>;

const HeadScalar kHeadScalars[] = {
    {"q_mean_norm", &HeadMetrics::q_mean_norm},
    {"k_mean_norm", &HeadMetrics::k_mean_norm},
    {"qk_mean_dot", &HeadMetrics::qk_mean_dot},
    {"qk_mean_cosine", &HeadMetrics::qk_mean_cosine},
    {"attn_entropy", &HeadMetrics::attn_entropy},
    {"q_anisotropy", &HeadMetrics::q_anisotropy},
    {"k_anisotropy", &HeadMetrics::k_anisotropy},
    {"attn_max_prob", &HeadMetrics::attn_max_prob},
    {"attn_min_prob", &HeadMetrics::attn_min_prob},
    {"attn_median_prob", &HeadMetrics::attn_median_prob},
    {"attn_first_token_mass", &HeadMetrics::attn_first_token_mass},
};
const HeadVector kHeadVectors[] = {
    {"q_mean", &HeadMetrics::q_mean},
    {"k_mean", &HeadMetrics::k_mean},
    {"q_mean_pre_rotary", &HeadMetrics::q_mean_pre_rotary},
    {"k_mean_pre_rotary", &HeadMetrics::k_mean_pre_rotary},
};
const HeadVector kSampleVectors[] = {
    {"q_sample", &HeadMetrics::q_sample},
    {"k_sample", &HeadMetrics::k_sample},
};
const HiddenScalar kHiddenScalars[] = {
    {"hidden_anisotropy", &HiddenStateMetrics::anisotropy},
    {"hidden_mean_norm", &HiddenStateMetrics::mean_norm},
    {"hidden_sv_skewness", &HiddenStateMetrics::sv_skewness},
    {"hidden_sv_median", &HiddenStateMetrics::sv_median},
    {"hidden_ev_1", &HiddenStateMetrics::ev_1},
    {"hidden_ev_10", &HiddenStateMetrics::ev_10},
    {"hidden_isoscore", &HiddenStateMetrics::isoscore},
    {"hidden_token_uniformity", &HiddenStateMetrics::token_uniformity},
    {"hidden_first_token_uniformity", &HiddenStateMetrics::first_token_uniformity},
    {"hidden_max_abs", &HiddenStateMetrics::max_abs},
    {"hidden_median_abs", &HiddenStateMetrics::median_abs},
};
const HiddenVector kHiddenVectors[] = {{"hidden_spectrum", &HiddenStateMetrics::spectrum}};
const CheckpointScalar kCheckpointScalars[] = {
    {"embed_partition_isotropy", &CheckpointMetrics::embed_partition_isotropy}};
const CheckpointVector kCheckpointVectors[] = {
    {"final_norm_gain", &CheckpointMetrics::final_norm_gain}};

template <typename Table>
std::vector<std::string> NamesOf(const Table& table) {
  std::vector<std::string> names;
  for (const auto& field : table) names.emplace_back(field.name);
  return names;
}

bool Contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

const std::vector<std::string>& PerHeadMetricNames() {
  static const std::vector<std::string> names = NamesOf(kHeadScalars);
  return names;
}
const std::vector<std::string>& PerHiddenStateMetricNames() {
  static const std::vector<std::string> names = NamesOf(kHiddenScalars);
  return names;
}
const std::vector<std::string>& PerCheckpointMetricNames() {
  static const std::vector<std::string> names = NamesOf(kCheckpointScalars);
  return names;
}
const std::vector<std::string>& PerBlockMetricNames() {
  static const std::vector<std::string> names = {"qk_mean_cosine_concat"};
  return names;
}
const std::vector<std::string>& PerHeadVectorKinds() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> kinds = NamesOf(kHeadVectors);
    for (const std::string& kind : TokenSampleKinds()) kinds.push_back(kind);
    return kinds;
  }();
  return names;
}
const std::vector<std::string>& TokenSampleKinds() {
  static const std::vector<std::string> names = NamesOf(kSampleVectors);
  return names;
}
const std::vector<std::string>& PerHiddenStateVectorKinds() {
  static const std::vector<std::string> names = NamesOf(kHiddenVectors);
  return names;
}
const std::vector<std::string>& PerCheckpointVectorKinds() {
  static const std::vector<std::string> names = NamesOf(kCheckpointVectors);
  return names;
}

const std::vector<std::string>& AllVectorKinds() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> kinds = PerHeadVectorKinds();
    for (const auto* more : {&PerHiddenStateVectorKinds(), &PerCheckpointVectorKinds()}) {
      kinds.insert(kinds.end(), more->begin(), more->end());
    }
    return kinds;
  }();
  return names;
}

bool MayBeUndefined(std::string_view name) {
  static const std::vector<std::string> undefined = {"qk_mean_cosine",
                                                     "q_anisotropy",
                                                     "k_anisotropy",
                                                     "qk_mean_cosine_concat",
                                                     "hidden_anisotropy",
                                                     "hidden_token_uniformity",
                                                     "hidden_first_token_uniformity",
                                                     "hidden_spectrum",
                                                     "hidden_sv_skewness",
                                                     "hidden_sv_median",
                                                     "hidden_ev_1",
                                                     "hidden_ev_10",
                                                     "hidden_isoscore"};
  return Contains(undefined, name);
}

std::optional<MetricScope> ScopeOfMetric(std::string_view name) {
  if (Contains(PerHeadMetricNames(), name)) return MetricScope::kHead;
  if (Contains(PerHiddenStateMetricNames(), name)) return MetricScope::kHiddenState;
  if (Contains(PerCheckpointMetricNames(), name)) return MetricScope::kCheckpoint;
  if (Contains(PerBlockMetricNames(), name)) return MetricScope::kBlock;
  return std::nullopt;
}

std::optional<MetricScope> ScopeOfVectorKind(std::string_view kind) {
  if (Contains(PerHeadVectorKinds(), kind)) return MetricScope::kHead;
  if (Contains(PerHiddenStateVectorKinds(), kind)) return MetricScope::kHiddenState;
  if (Contains(PerCheckpointVectorKinds(), kind)) return MetricScope::kCheckpoint;
  return std::nullopt;
}

void ForEachScalar(
    const CheckpointMetrics& metrics,
    const std::function<void(std::string_view name, int layer, int head, double value)>& fn) {
  for (const HeadMetrics& m : metrics.heads) {
    for (const HeadScalar& field : kHeadScalars) fn(field.name, m.layer, m.head, m.*field.member);
  }
  for (const HiddenStateMetrics& m : metrics.hidden_states) {
    for (const HiddenScalar& field : kHiddenScalars) fn(field.name, m.index, -1, m.*field.member);
  }
  for (const CheckpointScalar& field : kCheckpointScalars)
    fn(field.name, -1, -1, metrics.*field.member);
}

void ForEachVector(const CheckpointMetrics& metrics,
                   const std::function<void(std::string_view kind, int layer, int head,
                                            const std::vector<double>& values)>& fn) {
  for (const HeadMetrics& m : metrics.heads) {
    for (const HeadVector& field : kHeadVectors) {
      if (!(m.*field.member).empty()) fn(field.name, m.layer, m.head, m.*field.member);
    }
    for (const HeadVector& field : kSampleVectors) {
      if (!(m.*field.member).empty()) fn(field.name, m.layer, m.head, m.*field.member);
    }
  }
  for (const HiddenStateMetrics& m : metrics.hidden_states) {
    for (const HiddenVector& field : kHiddenVectors) {
      if (!(m.*field.member).empty()) fn(field.name, m.index, -1, m.*field.member);
    }
  }
  for (const CheckpointVector& field : kCheckpointVectors) {
    if (!(metrics.*field.member).empty()) fn(field.name, -1, -1, metrics.*field.member);
  }
}

}  // namespace anisoscope::analysis
