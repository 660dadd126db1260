#include "server/alarms/alarm_evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/metric_catalog/checkpoint_metrics.h"

namespace anisoscope::server {
namespace {

bool IsRelative(AlarmCondition condition) {
  return condition == AlarmCondition::kFallBy || condition == AlarmCondition::kRiseBy;
}

// The rule's aggregate per layer (-1 for a rule over layers); NaN values are left out.
std::map<int, double> Aggregates(const AlarmRule& rule,
                                 const std::vector<storage::ScalarValue>& values) {
  struct Sum {
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    double total = 0;
    int count = 0;
  };
  std::map<int, Sum> sums;
  for (const storage::ScalarValue& scalar : values) {
    if (std::isnan(scalar.value)) continue;
    // A per-checkpoint metric is stored at layer -1: one value either way.
    const int layer = rule.over == AlarmOver::kLayers ? -1 : scalar.layer;
    Sum& sum = sums[layer];
    sum.min = std::min(sum.min, scalar.value);
    sum.max = std::max(sum.max, scalar.value);
    sum.total += scalar.value;
    ++sum.count;
  }
  std::map<int, double> aggregates;
  for (const auto& [layer, sum] : sums) {
    switch (rule.aggregate) {
      case AlarmAggregate::kMin:
        aggregates[layer] = sum.min;
        break;
      case AlarmAggregate::kMax:
        aggregates[layer] = sum.max;
        break;
      case AlarmAggregate::kMean:
        aggregates[layer] = sum.total / sum.count;
        break;
    }
  }
  return aggregates;
}

bool Holds(const AlarmRule& rule, double value, double reference) {
  switch (rule.condition) {
    case AlarmCondition::kBelow:
      return value < reference;
    case AlarmCondition::kAbove:
      return value > reference;
    case AlarmCondition::kFallBy:
      return (value - reference) / std::abs(reference) <= -rule.amount;
    case AlarmCondition::kRiseBy:
      return (value - reference) / std::abs(reference) >= rule.amount;
  }
  return false;
}

}  // namespace

std::vector<AlarmCheck> CheckRule(const AlarmRule& rule,
                                  const std::vector<storage::ScalarValue>& current,
                                  const std::vector<storage::StepScalars>& history) {
  // The mean of each layer's aggregate over the previous `window` steps that have it.
  std::map<int, std::pair<double, int>> earlier;
  if (IsRelative(rule.condition)) {
    const size_t steps = std::min(history.size(), static_cast<size_t>(rule.window));
    for (size_t i = 0; i < steps; ++i) {
      for (const auto& [layer, value] : Aggregates(rule, history[i].values)) {
        earlier[layer].first += value;
        ++earlier[layer].second;
      }
    }
  }
  std::vector<AlarmCheck> checks;
  for (const auto& [layer, value] : Aggregates(rule, current)) {
    AlarmCheck check{layer, value, rule.amount, false};
    if (IsRelative(rule.condition)) {
      const auto it = earlier.find(layer);
      if (it == earlier.end()) continue;
      check.reference = it->second.first / it->second.second;
      if (check.reference == 0) continue;
    }
    check.holds = Holds(rule, value, check.reference);
    checks.push_back(check);
  }
  return checks;
}

std::string DescribeCheck(const AlarmRule& rule, const AlarmCheck& check) {
  const bool hidden = analysis::ScopeOfMetric(rule.metric) == analysis::MetricScope::kHiddenState;
  const std::string where = check.layer < 0
                                ? (hidden ? "over every hidden state" : "over every layer")
                            : hidden ? absl::StrCat("at hidden state ", check.layer)
                                     : absl::StrCat("over the heads of layer ", check.layer);
  std::string condition;
  switch (rule.condition) {
    case AlarmCondition::kBelow:
      condition = absl::StrFormat("below %g", check.reference);
      break;
    case AlarmCondition::kAbove:
      condition = absl::StrFormat("above %g", check.reference);
      break;
    case AlarmCondition::kFallBy:
    case AlarmCondition::kRiseBy: {
      const double change = (check.value - check.reference) / std::abs(check.reference);
      condition = absl::StrFormat(
          "%s %.0f%% against %s (%.4g)", change < 0 ? "down" : "up", std::abs(change) * 100,
          rule.window == 1 ? "the previous step"
                           : absl::StrCat("the mean of the previous ", rule.window, " steps"),
          check.reference);
      break;
    }
  }
  std::string text = absl::StrFormat("%s %s %s is %.4g, %s", AggregateName(rule.aggregate),
                                     rule.metric, where, check.value, condition);
  if (!rule.summary.empty()) absl::StrAppend(&text, ": ", rule.summary);
  return text;
}

}  // namespace anisoscope::server
