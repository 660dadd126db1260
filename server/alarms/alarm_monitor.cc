#include "server/alarms/alarm_monitor.h"

#include <algorithm>
#include <map>
#include <optional>
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

// The alarms firing after `changed` applied to `open` (as AlarmsOpenAt read it).
std::vector<storage::AlarmRecord> FiringAfter(const std::vector<storage::AlarmRecord>& open,
                                              const std::vector<AlarmChange>& changed) {
  std::vector<storage::AlarmRecord> firing;
  for (const storage::AlarmRecord& alarm : open) {
    if (!alarm.resolved_step.has_value()) firing.push_back(alarm);
  }
  for (const AlarmChange& change : changed) {
    firing.erase(std::remove_if(firing.begin(), firing.end(),
                                [&](const auto& old) { return old.id == change.alarm.id; }),
                 firing.end());
    if (!change.alarm.resolved_step.has_value()) firing.push_back(change.alarm);
  }
  return firing;
}

// How `stored` changed, against what the store had open before (`open`).
AlarmChange::Kind KindOfChange(const std::vector<storage::AlarmRecord>& open,
                               const storage::AlarmRecord& stored) {
  const auto prior = std::find_if(open.begin(), open.end(),
                                  [&](const auto& alarm) { return alarm.id == stored.id; });
  if (prior == open.end()) return AlarmChange::Kind::kFired;
  if (!prior->resolved_step.has_value()) {
    return stored.resolved_step.has_value() ? AlarmChange::Kind::kResolved
                                            : AlarmChange::Kind::kRefired;
  }
  if (!stored.resolved_step.has_value()) return AlarmChange::Kind::kReopened;
  return prior->resolved_step == stored.resolved_step ? AlarmChange::Kind::kRefired
                                                      : AlarmChange::Kind::kResolutionMoved;
}

// `alarm` with its resolution set to `step` (nullopt: firing again).
storage::AlarmRecord WithResolution(storage::AlarmRecord alarm, std::optional<int64_t> step) {
  alarm.resolved_step = step;
  return alarm;
}

}  // namespace

AlarmMonitor::AlarmMonitor(Options options, storage::MetricsStore* store)
    : options_(std::move(options)), store_(store) {}

absl::StatusOr<std::vector<AlarmChange>> AlarmMonitor::StepStored(const storage::StepResult& step) {
  absl::MutexLock lock(&mu_);
  const absl::StatusOr<std::vector<storage::AlarmRecord>> open =
      store_->AlarmsOpenAt(step.ns, step.run, step.probe.id, step.step);
  absl::StatusOr<std::vector<AlarmChange>> changed =
      open.ok() ? CheckRules(step, *open) : open.status();
  UpdateGauges(step);
  const auto run = runs_.find({step.ns, step.run});
  if (changed.ok() && run != runs_.end()) {
    run->second.firing[step.probe.id] = FiringAfter(*open, *changed);
  }
  return changed;
}

absl::StatusOr<std::vector<AlarmChange>> AlarmMonitor::CheckRules(
    const storage::StepResult& step, const std::vector<storage::AlarmRecord>& open) {
  std::vector<storage::AlarmRecord> fired;
  std::vector<storage::AlarmRecord> resolutions;
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
      // This rule and layer's alarms: firing (at any step), or resolved around this step.
      std::vector<const storage::AlarmRecord*> mine;
      for (const storage::AlarmRecord& alarm : open) {
        if (alarm.rule == rule.name && alarm.layer == check.layer) mine.push_back(&alarm);
      }
      const auto first = [&](auto predicate) {
        const auto found = std::find_if(mine.begin(), mine.end(), predicate);
        return found == mine.end() ? nullptr : *found;
      };
      if (!check.holds) {
        // Ends the events that began before this step: firing ones, and resolved ones whose
        // resolution (computed before this step was stored again) lies later.
        for (const storage::AlarmRecord* alarm : mine) {
          if (alarm->step < step.step && alarm->resolved_step != step.step) {
            resolutions.push_back(WithResolution(*alarm, step.step));
          }
        }
        continue;
      }
      const bool refire =
          first([&](const auto* alarm) { return alarm->step == step.step; }) != nullptr;
      const bool ongoing =
          first([&](const auto* alarm) {
            return !alarm->resolved_step.has_value() || *alarm->resolved_step > step.step;
          }) != nullptr;
      const storage::AlarmRecord* ended_here = first([&](const auto* alarm) {
        return alarm->resolved_step == step.step && alarm->step < step.step;
      });
      if (!refire && ongoing) continue;
      if (!refire && ended_here != nullptr) {
        resolutions.push_back(WithResolution(*ended_here, std::nullopt));
        continue;
      }
      // A new alarm, or the one fired at this step again (the store updates it in place).
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
    }
  }
  // An alarm of a rule no longer in the set (the rules changed across a restart) resolves.
  for (const storage::AlarmRecord& alarm : open) {
    const bool known = std::any_of(options_.rules.begin(), options_.rules.end(),
                                   [&](const AlarmRule& rule) { return rule.name == alarm.rule; });
    if (!known && !alarm.resolved_step.has_value() && alarm.step < step.step) {
      resolutions.push_back(WithResolution(alarm, step.step));
    }
  }
  if (fired.empty() && resolutions.empty()) return std::vector<AlarmChange>{};
  ASSIGN_OR_RETURN(const std::vector<storage::AlarmRecord> stored,
                   store_->RecordAlarms(fired, resolutions));
  std::vector<AlarmChange> changed;
  for (const storage::AlarmRecord& alarm : stored) {
    changed.push_back({KindOfChange(open, alarm), alarm});
  }
  return changed;
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
