#include "server/alarms/alarm_monitor.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/alarms/alarm_evaluation.h"
#include "server/monitoring/service_metrics.h"

namespace anisoscope::server {
namespace {

// The summary gauges per exported run: each the aggregate of one metric at the latest step,
// computed as an alarm rule's (the condition is unused).
struct SummaryGauge {
  const char* name;
  const char* help;
  AlarmRule rule;
};

const std::vector<SummaryGauge>& SummaryGauges() {
  static const auto* gauges = new std::vector<SummaryGauge>{
      {"anisoscope_run_min_attn_entropy",
       "Lowest attention entropy (nats) over the heads of each layer at the run's latest step.",
       {.metric = "attn_entropy", .over = AlarmOver::kHeads, .aggregate = AlarmAggregate::kMin}},
      {"anisoscope_run_max_attn_first_token_mass",
       "Highest attention weight on the first position over every head at the latest step.",
       {.metric = "attn_first_token_mass",
        .over = AlarmOver::kLayers,
        .aggregate = AlarmAggregate::kMax}},
      {"anisoscope_run_max_hidden_anisotropy",
       "Highest hidden-state anisotropy over the hidden states at the latest step.",
       {.metric = "hidden_anisotropy",
        .over = AlarmOver::kLayers,
        .aggregate = AlarmAggregate::kMax}},
      {"anisoscope_run_max_hidden_max_abs",
       "Largest absolute hidden-state activation over the hidden states at the latest step.",
       {.metric = "hidden_max_abs", .over = AlarmOver::kLayers, .aggregate = AlarmAggregate::kMax}},
  };
  return *gauges;
}

std::vector<storage::ScalarValue> ValuesOf(const storage::StepResult& step,
                                           const std::string& metric) {
  std::vector<storage::ScalarValue> values;
  for (const storage::ScalarValue& scalar : step.scalars) {
    if (scalar.metric == metric) values.push_back(scalar);
  }
  return values;
}

std::string LayerLabel(int layer) { return layer < 0 ? "all" : absl::StrCat(layer); }

// The alarms firing after `changed` (as RecordAlarms returned them) applied to `firing`.
std::vector<storage::AlarmRecord> FiringAfter(std::vector<storage::AlarmRecord> firing,
                                              const std::vector<storage::AlarmRecord>& changed) {
  for (const storage::AlarmRecord& alarm : changed) {
    if (alarm.resolved_step.has_value()) {
      firing.erase(std::remove_if(firing.begin(), firing.end(),
                                  [&](const auto& old) { return old.id == alarm.id; }),
                   firing.end());
    } else {
      firing.push_back(alarm);
    }
  }
  return firing;
}

}  // namespace

AlarmMonitor::AlarmMonitor(Options options, storage::MetricsStore* store)
    : options_(std::move(options)), store_(store) {}

absl::StatusOr<std::vector<storage::AlarmRecord>> AlarmMonitor::StepStored(
    const storage::StepResult& step) {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<std::vector<storage::AlarmRecord>> firing =
      store_->FiringAlarms(step.ns, step.run, step.probe.id);
  absl::StatusOr<std::vector<storage::AlarmRecord>> changed =
      firing.ok() ? CheckRules(step, *firing) : firing.status();
  UpdateGauges(step);
  const auto run = runs_.find({step.ns, step.run});
  if (changed.ok() && run != runs_.end()) {
    run->second.firing[step.probe.id] = FiringAfter(*firing, *changed);
  }
  return changed;
}

absl::StatusOr<std::vector<storage::AlarmRecord>> AlarmMonitor::CheckRules(
    const storage::StepResult& step, const std::vector<storage::AlarmRecord>& firing) {
  std::vector<storage::AlarmRecord> fired;
  std::vector<storage::AlarmRecord> resolved;
  // The earlier steps' values, read once per (metric, window) that a relative rule asks for.
  std::map<std::pair<std::string, int>, std::vector<storage::StepScalars>> histories;
  for (const AlarmRule& rule : options_.rules) {
    static const std::vector<storage::StepScalars> kNoHistory;
    const std::vector<storage::StepScalars>* history = &kNoHistory;
    if (rule.condition == AlarmCondition::kFallBy || rule.condition == AlarmCondition::kRiseBy) {
      const std::pair<std::string, int> key{rule.metric, rule.window};
      auto found = histories.find(key);
      if (found == histories.end()) {
        ASSIGN_OR_RETURN(std::vector<storage::StepScalars> read,
                         store_->ScalarsBefore(step.ns, step.run, step.probe.id, rule.metric,
                                               step.step, rule.window));
        found = histories.emplace(key, std::move(read)).first;
      }
      history = &found->second;
    }
    for (const AlarmCheck& check : CheckRule(rule, ValuesOf(step, rule.metric), *history)) {
      const auto current = std::find_if(firing.begin(), firing.end(), [&](const auto& alarm) {
        return alarm.rule == rule.name && alarm.layer == check.layer;
      });
      if (check.holds && current == firing.end()) {
        storage::AlarmRecord alarm;
        alarm.ns = step.ns;
        alarm.run = step.run;
        alarm.probe_id = step.probe.id;
        alarm.rule = rule.name;
        alarm.metric = rule.metric;
        alarm.layer = check.layer;
        alarm.step = step.step;
        alarm.value = check.value;
        alarm.reference = check.reference;
        alarm.severity = rule.severity;
        alarm.summary = DescribeCheck(rule, check);
        fired.push_back(std::move(alarm));
      } else if (!check.holds && current != firing.end() && current->step < step.step) {
        storage::AlarmRecord resolution = *current;
        resolution.resolved_step = step.step;
        resolved.push_back(std::move(resolution));
      }
    }
  }
  // An alarm of a rule no longer in the set (the rules changed across a restart) resolves.
  for (const storage::AlarmRecord& alarm : firing) {
    const bool known = std::any_of(options_.rules.begin(), options_.rules.end(),
                                   [&](const AlarmRule& rule) { return rule.name == alarm.rule; });
    if (!known && alarm.step < step.step) {
      storage::AlarmRecord resolution = alarm;
      resolution.resolved_step = step.step;
      resolved.push_back(std::move(resolution));
    }
  }
  if (fired.empty() && resolved.empty()) return std::vector<storage::AlarmRecord>{};
  return store_->RecordAlarms(fired, resolved);
}

void AlarmMonitor::UpdateGauges(const storage::StepResult& step) {
  const RunKey key{step.ns, step.run};
  recent_.remove(key);
  recent_.push_front(key);
  RunGauges& run = runs_[key];
  while (recent_.size() > static_cast<size_t>(std::max(options_.max_exported_runs, 0))) {
    runs_.erase(recent_.back());
    recent_.pop_back();
  }
  if (runs_.count(key) == 0 || (step.step < run.latest_step && !run.summaries.empty())) return;
  run.latest_step = step.step;
  for (const SummaryGauge& gauge : SummaryGauges()) {
    std::map<int, double>& values = run.summaries[gauge.name];
    values.clear();
    for (const AlarmCheck& check : CheckRule(gauge.rule, ValuesOf(step, gauge.rule.metric), {})) {
      values[check.layer] = check.value;
    }
  }
}

std::string AlarmMonitor::Exposition(const std::string& ns) const {
  absl::MutexLock lock(&mu_);
  std::string out;
  const auto labels = [&](const RunKey& key) {
    return absl::StrCat("namespace=\"", EscapeLabelValue(key.first), "\",run=\"",
                        EscapeLabelValue(key.second), "\"");
  };
  AppendHeader("anisoscope_alarm_firing", "gauge",
               "1 for each alarm rule firing for a run's layer (layer=\"all\": over every layer).",
               &out);
  for (const auto& [key, run] : runs_) {
    if (key.first != ns) continue;
    std::set<std::string> series;  // one per rule and layer, whatever the probe
    for (const auto& [probe, alarms] : run.firing) {
      for (const storage::AlarmRecord& alarm : alarms) {
        series.insert(absl::StrCat("anisoscope_alarm_firing{", labels(key), ",rule=\"",
                                   EscapeLabelValue(alarm.rule), "\",severity=\"",
                                   EscapeLabelValue(alarm.severity), "\",layer=\"",
                                   LayerLabel(alarm.layer), "\"} 1\n"));
      }
    }
    for (const std::string& line : series) absl::StrAppend(&out, line);
  }
  AppendHeader("anisoscope_run_latest_step", "gauge",
               "The latest step a run stored since the server started.", &out);
  for (const auto& [key, run] : runs_) {
    if (key.first != ns) continue;
    absl::StrAppend(&out, "anisoscope_run_latest_step{", labels(key), "} ", run.latest_step, "\n");
  }
  for (const SummaryGauge& gauge : SummaryGauges()) {
    AppendHeader(gauge.name, "gauge", gauge.help, &out);
    for (const auto& [key, run] : runs_) {
      if (key.first != ns) continue;
      const auto values = run.summaries.find(gauge.name);
      if (values == run.summaries.end()) continue;
      for (const auto& [layer, value] : values->second) {
        absl::StrAppend(&out, gauge.name, "{", labels(key),
                        layer < 0 ? "" : absl::StrCat(",layer=\"", layer, "\""), "} ",
                        PrometheusNumber(value), "\n");
      }
    }
  }
  return out;
}

}  // namespace anisoscope::server
