#include "analysis/metric_catalog/checkpoint_metrics.h"

#include <variant>

#include "analysis/metric_catalog/metric_catalog.h"

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

// The catalogue's entries whose value is a `Value Metrics::*` field (metric_catalog.cc, the
// one list), the token samples or the others, in catalogue order.
template <typename Metrics, typename Value>
std::vector<Field<Metrics, Value>> CatalogFields(bool token_samples) {
  std::vector<Field<Metrics, Value>> fields;
  for (const MetricInfo& info : MetricCatalog()) {
    const auto* member = std::get_if<Value Metrics::*>(&info.field);
    if (member != nullptr && info.token_sample == token_samples) {
      fields.push_back({info.name.c_str(), *member});
    }
  }
  return fields;
}

const std::vector<HeadScalar>& HeadScalars() {
  static const std::vector<HeadScalar> fields = CatalogFields<HeadMetrics, double>(false);
  return fields;
}
const std::vector<HeadVector>& HeadVectors() {
  static const std::vector<HeadVector> fields =
      CatalogFields<HeadMetrics, std::vector<double>>(false);
  return fields;
}
const std::vector<HeadVector>& SampleVectors() {
  static const std::vector<HeadVector> fields =
      CatalogFields<HeadMetrics, std::vector<double>>(true);
  return fields;
}
const std::vector<HiddenScalar>& HiddenScalars() {
  static const std::vector<HiddenScalar> fields = CatalogFields<HiddenStateMetrics, double>(false);
  return fields;
}
const std::vector<HiddenVector>& HiddenVectors() {
  static const std::vector<HiddenVector> fields =
      CatalogFields<HiddenStateMetrics, std::vector<double>>(false);
  return fields;
}
const std::vector<CheckpointScalar>& CheckpointScalars() {
  static const std::vector<CheckpointScalar> fields =
      CatalogFields<CheckpointMetrics, double>(false);
  return fields;
}
const std::vector<CheckpointVector>& CheckpointVectors() {
  static const std::vector<CheckpointVector> fields =
      CatalogFields<CheckpointMetrics, std::vector<double>>(false);
  return fields;
}

template <typename Table>
std::vector<std::string> NamesOf(const Table& table) {
  std::vector<std::string> names;
  for (const auto& field : table) names.emplace_back(field.name);
  return names;
}

}  // namespace

const std::vector<std::string>& PerHeadMetricNames() {
  static const std::vector<std::string> names = NamesOf(HeadScalars());
  return names;
}
const std::vector<std::string>& PerHiddenStateMetricNames() {
  static const std::vector<std::string> names = NamesOf(HiddenScalars());
  return names;
}
const std::vector<std::string>& PerCheckpointMetricNames() {
  static const std::vector<std::string> names = NamesOf(CheckpointScalars());
  return names;
}
const std::vector<std::string>& PerBlockMetricNames() {
  static const std::vector<std::string> names =
      CatalogNames(MetricScope::kBlock, MetricKind::kScalar);
  return names;
}
const std::vector<std::string>& PerHeadVectorKinds() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> kinds = NamesOf(HeadVectors());
    for (const std::string& kind : TokenSampleKinds()) kinds.push_back(kind);
    return kinds;
  }();
  return names;
}
const std::vector<std::string>& TokenSampleKinds() {
  static const std::vector<std::string> names = NamesOf(SampleVectors());
  return names;
}
const std::vector<std::string>& PerHiddenStateVectorKinds() {
  static const std::vector<std::string> names = NamesOf(HiddenVectors());
  return names;
}
const std::vector<std::string>& PerCheckpointVectorKinds() {
  static const std::vector<std::string> names = NamesOf(CheckpointVectors());
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
  const MetricInfo* info = FindMetric(name);
  return info != nullptr && info->may_be_undefined;
}

std::optional<MetricScope> ScopeOfMetric(std::string_view name) {
  const MetricInfo* info = FindMetric(name);
  if (info == nullptr || info->kind != MetricKind::kScalar) return std::nullopt;
  return info->scope;
}

std::optional<MetricScope> ScopeOfVectorKind(std::string_view kind) {
  const MetricInfo* info = FindMetric(kind);
  if (info == nullptr || info->kind != MetricKind::kVector) return std::nullopt;
  return info->scope;
}

MetricGroup MetricGroupOf(std::string_view name) {
  const MetricInfo* info = FindMetric(name);
  return info == nullptr ? MetricGroup::kCore : info->group;
}

void ForEachScalar(
    const CheckpointMetrics& metrics,
    const std::function<void(std::string_view name, int layer, int head, double value)>& fn) {
  const auto asked = [&metrics](const char* name) {
    return Has(metrics.groups, MetricGroupOf(name));
  };
  for (const HeadMetrics& m : metrics.heads) {
    for (const HeadScalar& field : HeadScalars()) {
      if (asked(field.name)) fn(field.name, m.layer, m.head, m.*field.member);
    }
  }
  for (const HiddenStateMetrics& m : metrics.hidden_states) {
    for (const HiddenScalar& field : HiddenScalars()) {
      if (asked(field.name)) fn(field.name, m.index, -1, m.*field.member);
    }
  }
  for (const CheckpointScalar& field : CheckpointScalars()) {
    if (asked(field.name)) fn(field.name, -1, -1, metrics.*field.member);
  }
}

void ForEachVector(const CheckpointMetrics& metrics,
                   const std::function<void(std::string_view kind, int layer, int head,
                                            const std::vector<double>& values)>& fn) {
  for (const HeadMetrics& m : metrics.heads) {
    for (const HeadVector& field : HeadVectors()) {
      if (!(m.*field.member).empty()) fn(field.name, m.layer, m.head, m.*field.member);
    }
    for (const HeadVector& field : SampleVectors()) {
      if (!(m.*field.member).empty()) fn(field.name, m.layer, m.head, m.*field.member);
    }
  }
  const auto asked = [&metrics](const char* name) {
    return Has(metrics.groups, MetricGroupOf(name));
  };
  for (const HiddenStateMetrics& m : metrics.hidden_states) {
    for (const HiddenVector& field : HiddenVectors()) {
      if (asked(field.name) && !(m.*field.member).empty()) {
        fn(field.name, m.index, -1, m.*field.member);
      }
    }
  }
  for (const CheckpointVector& field : CheckpointVectors()) {
    if (asked(field.name) && !(metrics.*field.member).empty()) {
      fn(field.name, -1, -1, metrics.*field.member);
    }
  }
}

}  // namespace anisoscope::analysis
