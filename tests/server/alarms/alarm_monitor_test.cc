// AlarmMonitor (server/alarms/alarm_monitor.h) against a real SQLite MetricsStore: steps are
// written with WriteStep, then handed to StepStored as the server does; and the ListAlarms
// query core (server/queries/queries.h) that serves what it stores.
#include "server/alarms/alarm_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/queries/queries.h"
#include "storage/metrics_store.h"
#include "tests/common/test_temp_dir.h"

namespace anisoscope::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// attn_entropy per layer (one value per head); other metrics as given.
struct StepValues {
  std::vector<std::vector<double>> attn_entropy;
  std::vector<double> hidden_max_abs;     // per hidden state
  std::vector<double> hidden_anisotropy;  // per hidden state
  std::vector<std::vector<double>> first_token_mass;
};

storage::StepResult MakeStep(const std::string& run, int64_t step, const StepValues& values,
                             const std::string& ns = storage::kDefaultNamespace,
                             const std::string& probe = "p") {
  storage::StepResult result;
  result.ns = ns;
  result.run = run;
  result.probe = {probe, "probe " + probe, 16, 64};
  result.step = step;
  result.checkpoint_path = "/ckpt/" + run + "/" + std::to_string(step);
  result.model_family = "gpt_neox";
  // The same shape for every step: the store refuses a run whose architecture changes.
  result.num_layers = 12;
  result.num_heads = 12;
  result.head_dim = 64;
  const auto heads = [&](const std::string& metric, const std::vector<std::vector<double>>& v) {
    for (size_t layer = 0; layer < v.size(); ++layer) {
      for (size_t head = 0; head < v[layer].size(); ++head) {
        result.scalars.push_back(
            {metric, static_cast<int>(layer), static_cast<int>(head), v[layer][head]});
      }
    }
  };
  const auto states = [&](const std::string& metric, const std::vector<double>& v) {
    for (size_t state = 0; state < v.size(); ++state) {
      result.scalars.push_back({metric, static_cast<int>(state), -1, v[state]});
    }
  };
  heads("attn_entropy", values.attn_entropy);
  heads("attn_first_token_mass", values.first_token_mass);
  states("hidden_max_abs", values.hidden_max_abs);
  states("hidden_anisotropy", values.hidden_anisotropy);
  return result;
}

AlarmRule Rule(const std::string& name, const std::string& metric, AlarmOver over,
               AlarmAggregate aggregate, AlarmCondition condition, double amount,
               const std::string& severity = "critical", int window = 1) {
  AlarmRule rule;
  rule.name = name;
  rule.metric = metric;
  rule.over = over;
  rule.aggregate = aggregate;
  rule.condition = condition;
  rule.amount = amount;
  rule.window = window;
  rule.severity = severity;
  rule.summary = "test rule " + name;
  return rule;
}

// min attn_entropy over the heads of each layer below 0.5.
AlarmRule Collapse() {
  return Rule("collapse", "attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMin,
              AlarmCondition::kBelow, 0.5);
}

class AlarmMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::MetricsStore::Open({dir_.File("metrics.db")});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  void StartMonitor(std::vector<AlarmRule> rules, int max_exported_runs = 32) {
    AlarmMonitor::Options options;
    options.rules = std::move(rules);
    options.max_exported_runs = max_exported_runs;
    monitor_ = std::make_unique<AlarmMonitor>(std::move(options), store_.get());
  }

  // Writes `step` (replacing a stored one, as --force does) and tells the monitor, as the
  // server does; the changes it made.
  std::vector<AlarmChange> StoreChanges(const storage::StepResult& step) {
    const absl::Status written = store_->WriteStep(step, /*replace=*/true);
    EXPECT_TRUE(written.ok()) << written;
    absl::StatusOr<std::vector<AlarmChange>> changed = monitor_->StepStored(step);
    EXPECT_TRUE(changed.ok()) << changed.status();
    return changed.ok() ? *changed : std::vector<AlarmChange>{};
  }

  // The alarms storing `step` changed.
  std::vector<storage::AlarmRecord> Store(const storage::StepResult& step) {
    std::vector<storage::AlarmRecord> alarms;
    for (const AlarmChange& change : StoreChanges(step)) alarms.push_back(change.alarm);
    return alarms;
  }

  std::vector<storage::AlarmRecord> Alarms(const std::string& run = "",
                                           std::optional<bool> firing = std::nullopt,
                                           const std::string& ns = storage::kDefaultNamespace) {
    storage::AlarmQuery query;
    query.ns = ns;
    query.run = run;
    query.firing = firing;
    absl::StatusOr<storage::AlarmList> list = store_->ListAlarms(query);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? list->alarms : std::vector<storage::AlarmRecord>{};
  }

  TestTempDir dir_;
  std::unique_ptr<storage::MetricsStore> store_;
  std::unique_ptr<AlarmMonitor> monitor_;
};

TEST_F(AlarmMonitorTest, FiresOnceWhileTheConditionHolds) {
  StartMonitor({Collapse()});
  EXPECT_TRUE(Store(MakeStep("r", 1, {{{1.0, 2.0}}})).empty());

  const std::vector<storage::AlarmRecord> fired = Store(MakeStep("r", 2, {{{0.3, 2.0}}}));
  ASSERT_EQ(fired.size(), 1u);
  const storage::AlarmRecord& alarm = fired[0];
  EXPECT_GT(alarm.id, 0);
  EXPECT_EQ(alarm.ns, storage::kDefaultNamespace);
  EXPECT_EQ(alarm.run, "r");
  EXPECT_EQ(alarm.probe_id, "p");
  EXPECT_EQ(alarm.rule, "collapse");
  EXPECT_EQ(alarm.metric, "attn_entropy");
  EXPECT_EQ(alarm.layer, 0);
  EXPECT_EQ(alarm.step, 2);
  EXPECT_EQ(alarm.value, 0.3);
  EXPECT_EQ(alarm.reference, 0.5);
  EXPECT_EQ(alarm.severity, "critical");
  EXPECT_THAT(alarm.summary, HasSubstr("0.3"));
  EXPECT_THAT(alarm.summary, HasSubstr("below 0.5"));
  EXPECT_THAT(alarm.summary, HasSubstr("test rule collapse"));
  EXPECT_FALSE(alarm.resolved_step.has_value());

  // Still holding: no second alarm.
  EXPECT_TRUE(Store(MakeStep("r", 3, {{{0.2, 2.0}}})).empty());
  EXPECT_TRUE(Store(MakeStep("r", 4, {{{0.1, 0.1}}})).empty());
  const std::vector<storage::AlarmRecord> stored = Alarms();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].id, alarm.id);
  EXPECT_EQ(stored[0].step, 2);
  EXPECT_FALSE(stored[0].resolved_step.has_value());
}

TEST_F(AlarmMonitorTest, ResolvesAtTheFirstStepWhereItNoLongerHolds) {
  StartMonitor({Collapse()});
  const std::vector<storage::AlarmRecord> fired = Store(MakeStep("r", 10, {{{0.3}}}));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_TRUE(Store(MakeStep("r", 20, {{{0.4}}})).empty());

  const std::vector<storage::AlarmRecord> resolved = Store(MakeStep("r", 30, {{{0.5}}}));
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].id, fired[0].id);
  EXPECT_EQ(resolved[0].step, 10);
  EXPECT_EQ(resolved[0].resolved_step, 30);
  EXPECT_FALSE(resolved[0].resolved_at.empty());
  EXPECT_GT(resolved[0].revision, fired[0].revision);

  EXPECT_TRUE(Store(MakeStep("r", 40, {{{1.0}}})).empty());
  EXPECT_TRUE(Alarms("r", true).empty());
  EXPECT_EQ(Alarms("r", false).size(), 1u);
}

TEST_F(AlarmMonitorTest, FiresAgainLaterAsANewAlarm) {
  StartMonitor({Collapse()});
  const std::vector<storage::AlarmRecord> first = Store(MakeStep("r", 1, {{{0.3}}}));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(Store(MakeStep("r", 2, {{{0.9}}})).size(), 1u);
  const std::vector<storage::AlarmRecord> second = Store(MakeStep("r", 3, {{{0.1}}}));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].id, first[0].id);
  EXPECT_EQ(second[0].step, 3);
  EXPECT_EQ(second[0].value, 0.1);
  EXPECT_FALSE(second[0].resolved_step.has_value());

  const std::vector<storage::AlarmRecord> all = Alarms("r");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].resolved_step, 2);
  EXPECT_EQ(all[1].id, second[0].id);
}

TEST_F(AlarmMonitorTest, StepStoredOutOfOrderDoesNotResolve) {
  StartMonitor({Collapse()});
  const std::vector<storage::AlarmRecord> fired = Store(MakeStep("r", 10, {{{0.3}}}));
  ASSERT_EQ(fired.size(), 1u);
  // An earlier step, stored late, where the rule does not hold.
  EXPECT_TRUE(Store(MakeStep("r", 5, {{{2.0}}})).empty());
  EXPECT_EQ(Alarms("r", true).size(), 1u);
  // An earlier step where it holds: no second alarm either.
  EXPECT_TRUE(Store(MakeStep("r", 7, {{{0.1}}})).empty());

  const std::vector<storage::AlarmRecord> resolved = Store(MakeStep("r", 11, {{{2.0}}}));
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].id, fired[0].id);
  EXPECT_EQ(resolved[0].resolved_step, 11);
}

// The kinds of `changes`, in order.
std::vector<AlarmChange::Kind> Kinds(const std::vector<AlarmChange>& changes) {
  std::vector<AlarmChange::Kind> kinds;
  for (const AlarmChange& change : changes) kinds.push_back(change.kind);
  return kinds;
}

using Kind = AlarmChange::Kind;

// Layer 0 collapses at steps 2-3 and recovers at 4; layer 1 collapses from step 3 on.
std::vector<storage::StepResult> CollapseRun() {
  std::vector<storage::StepResult> steps;
  const std::vector<std::pair<double, double>> entropy = {
      {1.0, 1.0}, {0.3, 1.0}, {0.2, 0.4}, {0.9, 0.3}, {0.9, 0.2}};
  for (size_t i = 0; i < entropy.size(); ++i) {
    steps.push_back(
        MakeStep("r", static_cast<int64_t>(i) + 1, {{{entropy[i].first}, {entropy[i].second}}}));
  }
  return steps;
}

TEST_F(AlarmMonitorTest, ForceRerunLeavesOneAlarmPerEventUpdatedInPlace) {
  StartMonitor({Collapse()});
  for (const storage::StepResult& step : CollapseRun()) Store(step);
  // By layer (the list is by revision, which the re-run changes).
  const auto by_layer = [&] {
    std::vector<storage::AlarmRecord> alarms = Alarms("r");
    std::sort(alarms.begin(), alarms.end(),
              [](const auto& a, const auto& b) { return a.layer < b.layer; });
    return alarms;
  };
  const std::vector<storage::AlarmRecord> before = by_layer();
  ASSERT_EQ(before.size(), 2u);
  const int64_t last_revision = std::max(before[0].revision, before[1].revision);

  // The whole run stored again, in step order: each alarm fires again at its own step and
  // is updated in place; its resolution, found again at the same step, is left alone.
  std::vector<std::vector<Kind>> kinds;
  for (const storage::StepResult& step : CollapseRun()) kinds.push_back(Kinds(StoreChanges(step)));
  EXPECT_EQ(kinds,
            (std::vector<std::vector<Kind>>{{}, {Kind::kRefired}, {Kind::kRefired}, {}, {}}));

  const std::vector<storage::AlarmRecord> after = by_layer();
  ASSERT_EQ(after.size(), 2u);
  for (size_t i = 0; i < after.size(); ++i) {
    const storage::AlarmRecord& old = before[i];
    const storage::AlarmRecord& now = after[i];
    EXPECT_EQ(now.id, old.id);
    EXPECT_EQ(now.layer, old.layer);
    EXPECT_EQ(now.step, old.step);
    EXPECT_EQ(now.value, old.value);
    EXPECT_EQ(now.fired_at, old.fired_at);
    EXPECT_EQ(now.resolved_step, old.resolved_step);
    EXPECT_EQ(now.resolved_at, old.resolved_at);
    EXPECT_GT(now.revision, last_revision);  // pollers see both again
  }
  EXPECT_EQ(after[0].layer, 0);
  EXPECT_EQ(after[0].step, 2);
  EXPECT_EQ(after[0].resolved_step, 4);
  EXPECT_EQ(after[1].layer, 1);
  EXPECT_EQ(after[1].step, 3);
  EXPECT_FALSE(after[1].resolved_step.has_value());

  // A third time, with the latest step first (it holds): still one per event.
  EXPECT_EQ(Kinds(StoreChanges(CollapseRun().back())), std::vector<Kind>{});
  for (const storage::StepResult& step : CollapseRun()) Store(step);
  EXPECT_EQ(Alarms("r").size(), 2u);
}

TEST_F(AlarmMonitorTest, RerunWhereTheRuleHoldsLongerReopensTheAlarmAndResolvesItLater) {
  StartMonitor({Collapse()});
  for (const auto& [step, entropy] :
       std::vector<std::pair<int64_t, double>>{{1, 1.0}, {2, 0.3}, {3, 0.9}, {4, 0.9}}) {
    Store(MakeStep("r", step, {{{entropy}}}));
  }
  ASSERT_EQ(Alarms("r").size(), 1u);
  ASSERT_EQ(Alarms("r")[0].resolved_step, 3);
  const int64_t id = Alarms("r")[0].id;

  // Recomputed (say a fixed checkpoint): the collapse lasts through step 3, ends at 4.
  EXPECT_EQ(Kinds(StoreChanges(MakeStep("r", 1, {{{1.0}}}))), std::vector<Kind>{});
  EXPECT_EQ(Kinds(StoreChanges(MakeStep("r", 2, {{{0.3}}}))), std::vector<Kind>{Kind::kRefired});
  const std::vector<AlarmChange> reopened = StoreChanges(MakeStep("r", 3, {{{0.4}}}));
  ASSERT_EQ(Kinds(reopened), std::vector<Kind>{Kind::kReopened});
  EXPECT_EQ(reopened[0].alarm.id, id);
  EXPECT_FALSE(reopened[0].alarm.resolved_step.has_value());
  EXPECT_EQ(reopened[0].alarm.resolved_at, "");
  const std::vector<AlarmChange> resolved = StoreChanges(MakeStep("r", 4, {{{0.9}}}));
  ASSERT_EQ(Kinds(resolved), std::vector<Kind>{Kind::kResolved});
  EXPECT_EQ(resolved[0].alarm.resolved_step, 4);

  const std::vector<storage::AlarmRecord> alarms = Alarms("r");
  ASSERT_EQ(alarms.size(), 1u);
  EXPECT_EQ(alarms[0].id, id);
  EXPECT_EQ(alarms[0].step, 2);
  EXPECT_EQ(alarms[0].resolved_step, 4);
}

TEST_F(AlarmMonitorTest, RerunWhereTheRuleEndsSoonerMovesTheResolutionEarlier) {
  StartMonitor({Collapse()});
  for (const auto& [step, entropy] :
       std::vector<std::pair<int64_t, double>>{{1, 1.0}, {2, 0.3}, {3, 0.4}, {4, 0.9}}) {
    Store(MakeStep("r", step, {{{entropy}}}));
  }
  ASSERT_EQ(Alarms("r")[0].resolved_step, 4);

  Store(MakeStep("r", 1, {{{1.0}}}));
  EXPECT_EQ(Kinds(StoreChanges(MakeStep("r", 2, {{{0.3}}}))), std::vector<Kind>{Kind::kRefired});
  const std::vector<AlarmChange> moved = StoreChanges(MakeStep("r", 3, {{{0.9}}}));
  ASSERT_EQ(Kinds(moved), std::vector<Kind>{Kind::kResolutionMoved});
  EXPECT_EQ(moved[0].alarm.resolved_step, 3);
  EXPECT_FALSE(moved[0].StateChanged());
  // Step 4 holds nothing new: the event ended at 3.
  EXPECT_TRUE(StoreChanges(MakeStep("r", 4, {{{0.9}}})).empty());

  const std::vector<storage::AlarmRecord> alarms = Alarms("r");
  ASSERT_EQ(alarms.size(), 1u);
  EXPECT_EQ(alarms[0].resolved_step, 3);
}

TEST_F(AlarmMonitorTest, OnlyFiringResolvingAndReopeningChangeTheState) {
  EXPECT_TRUE((AlarmChange{Kind::kFired, {}}.StateChanged()));
  EXPECT_TRUE((AlarmChange{Kind::kResolved, {}}.StateChanged()));
  EXPECT_TRUE((AlarmChange{Kind::kReopened, {}}.StateChanged()));
  EXPECT_FALSE((AlarmChange{Kind::kRefired, {}}.StateChanged()));
  EXPECT_FALSE((AlarmChange{Kind::kResolutionMoved, {}}.StateChanged()));
}

TEST_F(AlarmMonitorTest, PerLayerAlarmsAreIndependent) {
  StartMonitor({Collapse()});
  const std::vector<storage::AlarmRecord> layer1 = Store(MakeStep("r", 1, {{{1.0}, {0.2}}}));
  ASSERT_EQ(layer1.size(), 1u);
  EXPECT_EQ(layer1[0].layer, 1);

  const std::vector<storage::AlarmRecord> layer0 = Store(MakeStep("r", 2, {{{0.1}, {0.2}}}));
  ASSERT_EQ(layer0.size(), 1u);
  EXPECT_EQ(layer0[0].layer, 0);
  EXPECT_EQ(layer0[0].step, 2);

  const std::vector<storage::AlarmRecord> resolved = Store(MakeStep("r", 3, {{{0.1}, {0.9}}}));
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].id, layer1[0].id);
  EXPECT_EQ(resolved[0].resolved_step, 3);

  const std::vector<storage::AlarmRecord> firing = Alarms("r", true);
  ASSERT_EQ(firing.size(), 1u);
  EXPECT_EQ(firing[0].id, layer0[0].id);
}

TEST_F(AlarmMonitorTest, RulesAndProbesAndRunsAreIndependent) {
  StartMonitor({Collapse(), Rule("spike", "hidden_max_abs", AlarmOver::kLayers,
                                 AlarmAggregate::kMax, AlarmCondition::kAbove, 100, "warning")});
  const std::vector<storage::AlarmRecord> both =
      Store(MakeStep("r", 1, {{{0.1}}, {1.0, 500.0}}, storage::kDefaultNamespace, "p"));
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].rule, "collapse");
  EXPECT_EQ(both[1].rule, "spike");
  EXPECT_EQ(both[1].layer, -1);
  EXPECT_EQ(both[1].value, 500.0);
  EXPECT_EQ(both[1].severity, "warning");

  // Another probe of the same run, healthy: resolves nothing of probe p; a run of its own.
  EXPECT_TRUE(Store(MakeStep("r", 2, {{{1.0}}, {1.0}}, storage::kDefaultNamespace, "q")).empty());
  EXPECT_TRUE(Store(MakeStep("s", 2, {{{1.0}}, {1.0}})).empty());
  EXPECT_EQ(Alarms("r", true).size(), 2u);

  // Probe p: only the spike goes.
  const std::vector<storage::AlarmRecord> resolved =
      Store(MakeStep("r", 3, {{{0.1}}, {1.0, 5.0}}, storage::kDefaultNamespace, "p"));
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].rule, "spike");
}

TEST_F(AlarmMonitorTest, StepWithoutTheMetricNeitherFiresNorResolves) {
  StartMonitor({Collapse()});
  ASSERT_EQ(Store(MakeStep("r", 1, {{{0.1}}})).size(), 1u);
  EXPECT_TRUE(Store(MakeStep("r", 2, {{}, {5.0}})).empty());  // hidden states only
  EXPECT_EQ(Alarms("r", true).size(), 1u);
}

TEST_F(AlarmMonitorTest, RelativeRuleComparesWithTheStoredHistory) {
  StartMonitor({Rule("drop", "attn_entropy", AlarmOver::kLayers, AlarmAggregate::kMean,
                     AlarmCondition::kFallBy, 0.5, "warning")});
  EXPECT_TRUE(Store(MakeStep("r", 1, {{{4.0, 4.0}}})).empty());  // no history: no check
  EXPECT_TRUE(Store(MakeStep("r", 2, {{{3.0, 2.0}}})).empty());  // -37.5%
  const std::vector<storage::AlarmRecord> fired = Store(MakeStep("r", 3, {{{1.0, 1.5}}}));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].layer, -1);
  EXPECT_EQ(fired[0].value, 1.25);
  EXPECT_EQ(fired[0].reference, 2.5);  // the previous step's, read back from the store
  EXPECT_THAT(fired[0].summary, HasSubstr("down 50%"));
  // Level again: no longer falling, so it resolves.
  const std::vector<storage::AlarmRecord> resolved = Store(MakeStep("r", 4, {{{1.25, 1.25}}}));
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].resolved_step, 4);
}

TEST_F(AlarmMonitorTest, RelativeRuleWindowAveragesThePreviousStoredSteps) {
  StartMonitor({Rule("drop3", "attn_entropy", AlarmOver::kHeads, AlarmAggregate::kMean,
                     AlarmCondition::kFallBy, 0.5, "warning", 3)});
  // Stored out of order: the window is by step, not by arrival.
  for (const auto& [step, value] :
       std::vector<std::pair<int64_t, double>>{{1, 1.0}, {3, 2.0}, {2, 4.0}, {4, 3.0}}) {
    EXPECT_TRUE(Store(MakeStep("r", step, {{{value}}})).empty()) << step;
  }
  // Step 5: the mean of steps 4, 3, 2 is 3 and 1.5 is -50% (with step 1 too it would be
  // -40%, not enough).
  const std::vector<storage::AlarmRecord> fired = Store(MakeStep("r", 5, {{{1.5}}}));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].reference, 3.0);
  EXPECT_EQ(fired[0].value, 1.5);
  EXPECT_THAT(fired[0].summary, HasSubstr("the mean of the previous 3 steps"));
}

TEST_F(AlarmMonitorTest, DefaultRulesFireOnADegeneratingRun) {
  absl::StatusOr<std::vector<AlarmRule>> rules = LoadAlarmRules("");
  ASSERT_TRUE(rules.ok()) << rules.status();
  StartMonitor(*rules);
  EXPECT_TRUE(Store(MakeStep("r", 1, {{{3.0, 3.0}}, {10.0, 20.0}, {0.5, 0.5}})).empty());
  const std::vector<storage::AlarmRecord> fired =
      Store(MakeStep("r", 2, {{{0.4, 0.4}}, {10.0, 45.0}, {0.995, 0.999}}));
  std::vector<std::string> names;
  for (const storage::AlarmRecord& alarm : fired) names.push_back(alarm.rule);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(
                         "attention_entropy_collapse", "attention_entropy_drop",
                         "massive_activation_growth", "representation_collapse"));
}

TEST_F(AlarmMonitorTest, StepOfARunNotStoredIsAnErrorAndStoresNothing) {
  StartMonitor({Collapse()});
  // Handed to the monitor without WriteStep: the alarm has no run to refer to.
  const absl::StatusOr<std::vector<AlarmChange>> changed =
      monitor_->StepStored(MakeStep("unwritten", 1, {{{0.1}}}));
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kNotFound) << changed.status();
  EXPECT_TRUE(Alarms().empty());
  // Once stored, the next step fires as usual.
  EXPECT_EQ(Store(MakeStep("unwritten", 2, {{{0.1}}})).size(), 1u);
}

TEST_F(AlarmMonitorTest, ExpositionShowsOneSeriesForARuleFiringOnSeveralProbes) {
  StartMonitor({Collapse()});
  ASSERT_EQ(Store(MakeStep("r", 1, {{{0.1}}}, storage::kDefaultNamespace, "p")).size(), 1u);
  ASSERT_EQ(Store(MakeStep("r", 1, {{{0.2}}}, storage::kDefaultNamespace, "q")).size(), 1u);
  const std::string text = monitor_->Exposition(storage::kDefaultNamespace);
  const std::string series =
      "anisoscope_alarm_firing{namespace=\"default\",run=\"r\",rule=\"collapse\","
      "severity=\"critical\",layer=\"0\"} 1\n";
  const size_t first = text.find(series);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find(series, first + 1), std::string::npos) << text;
  // One probe resolving leaves the other's alarm, and the series, in place.
  ASSERT_EQ(Store(MakeStep("r", 2, {{{0.9}}}, storage::kDefaultNamespace, "p")).size(), 1u);
  EXPECT_THAT(monitor_->Exposition(storage::kDefaultNamespace), HasSubstr(series));
  ASSERT_EQ(Store(MakeStep("r", 2, {{{0.9}}}, storage::kDefaultNamespace, "q")).size(), 1u);
  EXPECT_THAT(monitor_->Exposition(storage::kDefaultNamespace), Not(HasSubstr(series)));
}

TEST_F(AlarmMonitorTest, NoRulesStoresNothingButKeepsTheGauges) {
  StartMonitor({});
  EXPECT_TRUE(Store(MakeStep("r", 1, {{{0.01}}})).empty());
  EXPECT_TRUE(Alarms().empty());
  EXPECT_THAT(monitor_->Exposition(storage::kDefaultNamespace),
              HasSubstr("anisoscope_run_latest_step{namespace=\"default\",run=\"r\"} 1\n"));
}

TEST_F(AlarmMonitorTest, ExpositionShowsFiringAlarmsAndSummaryGauges) {
  StartMonitor({Collapse(), Rule("spike", "hidden_max_abs", AlarmOver::kLayers,
                                 AlarmAggregate::kMax, AlarmCondition::kAbove, 100, "warning")});
  Store(MakeStep("r", 7,
                 {{{1.5, 2.0}, {0.25, 3.0}},
                  {10.0, 250.0, 20.0},
                  {0.5, 0.75, 0.125},
                  {{0.1, 0.6}, {0.2, 0.3}}}));
  const std::string text = monitor_->Exposition(storage::kDefaultNamespace);
  EXPECT_THAT(text, HasSubstr("# TYPE anisoscope_alarm_firing gauge\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_alarm_firing{namespace=\"default\",run=\"r\",rule="
                              "\"collapse\",severity=\"critical\",layer=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_alarm_firing{namespace=\"default\",run=\"r\",rule="
                              "\"spike\",severity=\"warning\",layer=\"all\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("severity=\"critical\",layer=\"0\"")));  // layer 0 is healthy
  EXPECT_THAT(text, HasSubstr("anisoscope_run_latest_step{namespace=\"default\",run=\"r\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE anisoscope_run_min_attn_entropy gauge\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_min_attn_entropy{namespace=\"default\",run=\"r\","
                              "layer=\"0\"} 1.5\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_min_attn_entropy{namespace=\"default\",run=\"r\","
                              "layer=\"1\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_max_attn_first_token_mass{namespace=\"default\","
                              "run=\"r\"} 0.6\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_max_hidden_anisotropy{namespace=\"default\","
                              "run=\"r\"} 0.75\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_max_hidden_max_abs{namespace=\"default\","
                              "run=\"r\"} 250\n"));

  // Resolved: the series goes; the gauges follow the latest step.
  Store(MakeStep("r", 8, {{{1.5, 2.0}, {0.75, 3.0}}, {10.0, 50.0, 20.0}}));
  const std::string after = monitor_->Exposition(storage::kDefaultNamespace);
  EXPECT_THAT(after, Not(HasSubstr("anisoscope_alarm_firing{")));
  EXPECT_THAT(after, HasSubstr("anisoscope_run_latest_step{namespace=\"default\",run=\"r\"} 8\n"));
  EXPECT_THAT(after, HasSubstr("anisoscope_run_min_attn_entropy{namespace=\"default\",run=\"r\","
                               "layer=\"1\"} 0.75\n"));
  EXPECT_THAT(after, HasSubstr("anisoscope_run_max_hidden_max_abs{namespace=\"default\","
                               "run=\"r\"} 50\n"));
  // Metrics the latest step lacks have no sample.
  EXPECT_THAT(after, Not(HasSubstr("anisoscope_run_max_hidden_anisotropy{")));
  EXPECT_THAT(after, Not(HasSubstr("anisoscope_run_max_attn_first_token_mass{")));
}

TEST_F(AlarmMonitorTest, ExpositionKeepsTheLatestStepWhenAnEarlierOneIsStored) {
  StartMonitor({Collapse()});
  Store(MakeStep("r", 20, {{{1.0}}}));
  Store(MakeStep("r", 10, {{{3.0}}}));
  const std::string text = monitor_->Exposition(storage::kDefaultNamespace);
  EXPECT_THAT(text, HasSubstr("anisoscope_run_latest_step{namespace=\"default\",run=\"r\"} 20\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_min_attn_entropy{namespace=\"default\",run=\"r\","
                              "layer=\"0\"} 1\n"));
}

TEST_F(AlarmMonitorTest, ExpositionShowsOnlyTheGivenNamespace) {
  StartMonitor({Collapse()});
  Store(MakeStep("mine", 1, {{{0.1}}}, "default"));
  Store(MakeStep("theirs", 1, {{{0.1}}}, "team"));
  const std::string mine = monitor_->Exposition("default");
  EXPECT_THAT(mine, HasSubstr("run=\"mine\""));
  EXPECT_THAT(mine, Not(HasSubstr("theirs")));
  EXPECT_THAT(mine, Not(HasSubstr("namespace=\"team\"")));
  const std::string theirs = monitor_->Exposition("team");
  EXPECT_THAT(theirs, HasSubstr("anisoscope_alarm_firing{namespace=\"team\",run=\"theirs\","));
  EXPECT_THAT(theirs, Not(HasSubstr("mine")));
  // Another namespace sees the headers only.
  const std::string none = monitor_->Exposition("nobody");
  EXPECT_THAT(none, HasSubstr("# TYPE anisoscope_alarm_firing gauge\n"));
  EXPECT_THAT(none, Not(HasSubstr("run=")));
}

TEST_F(AlarmMonitorTest, ExpositionCoversAtMostMaxExportedRunsDroppingTheLeastRecent) {
  StartMonitor({Collapse()}, /*max_exported_runs=*/2);
  Store(MakeStep("a", 1, {{{0.1}}}));
  Store(MakeStep("b", 1, {{{0.1}}}));
  Store(MakeStep("c", 1, {{{0.1}}}));
  std::string text = monitor_->Exposition(storage::kDefaultNamespace);
  EXPECT_THAT(text, Not(HasSubstr("run=\"a\"")));
  EXPECT_THAT(text, HasSubstr("anisoscope_alarm_firing{namespace=\"default\",run=\"b\","));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_latest_step{namespace=\"default\",run=\"c\"} 1\n"));

  // a stores again: now b is the least recent.
  Store(MakeStep("a", 2, {{{0.1}}}));
  text = monitor_->Exposition(storage::kDefaultNamespace);
  EXPECT_THAT(text, Not(HasSubstr("run=\"b\"")));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_latest_step{namespace=\"default\",run=\"a\"} 2\n"));
  // Its alarm, fired before it was dropped, is still firing and shown again.
  EXPECT_THAT(text, HasSubstr("anisoscope_alarm_firing{namespace=\"default\",run=\"a\","));
  EXPECT_THAT(text, HasSubstr("run=\"c\""));
  // The alarms stay stored whatever is exported.
  EXPECT_EQ(Alarms("", true).size(), 3u);
}

TEST_F(AlarmMonitorTest, ZeroExportedRunsExportsNoRunButStillFires) {
  StartMonitor({Collapse()}, /*max_exported_runs=*/0);
  EXPECT_EQ(Store(MakeStep("r", 1, {{{0.1}}})).size(), 1u);
  EXPECT_THAT(monitor_->Exposition(storage::kDefaultNamespace), Not(HasSubstr("run=")));
  EXPECT_EQ(Store(MakeStep("r", 2, {{{0.9}}})).size(), 1u);  // resolves
}

TEST_F(AlarmMonitorTest, ExpositionEscapesLabelValues) {
  StartMonitor({Collapse()});
  Store(MakeStep("we\"ird\\run\nx", 1, {{{0.1}}}, "n\"s"));
  const std::string text = monitor_->Exposition("n\"s");
  EXPECT_THAT(text, HasSubstr("anisoscope_alarm_firing{namespace=\"n\\\"s\",run=\"we\\\"ird\\\\run"
                              "\\nx\",rule=\"collapse\""));
  EXPECT_THAT(text, HasSubstr("anisoscope_run_latest_step{namespace=\"n\\\"s\",run=\"we\\\"ird\\\\"
                              "run\\nx\"} 1\n"));
  // Every line is a comment or a sample: no raw newline leaked from a label.
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("anisoscope_", 0) == 0) << line;
    start = end + 1;
  }
}

// ---- ListAlarms, the query core of GET /api/v1/alarms and QueryService.ListAlarms ----

TEST_F(AlarmMonitorTest, ListAlarmsValidatesTheRequest) {
  pb::ListAlarmsRequest request;
  request.set_since_revision(-1);
  absl::StatusOr<pb::ListAlarmsResponse> response =
      queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("since_revision"));

  for (const int limit : {-1, queries::kMaxAlarmsListed + 1}) {
    request = {};
    request.set_limit(limit);
    response = queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << limit;
    EXPECT_THAT(std::string(response.status().message()), HasSubstr("limit")) << limit;
  }
  request = {};
  request.set_limit(queries::kMaxAlarmsListed);
  EXPECT_TRUE(queries::ListAlarms(*store_, storage::kDefaultNamespace, request).ok());

  request = {};
  request.set_run("../etc");
  EXPECT_EQ(queries::ListAlarms(*store_, storage::kDefaultNamespace, request).status().code(),
            absl::StatusCode::kInvalidArgument);

  // An unknown run is NOT_FOUND, as on every run query; so is another namespace's run.
  request = {};
  request.set_run("ghost");
  response = queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kNotFound) << response.status();
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("ghost"));
  StartMonitor({Collapse()});
  Store(MakeStep("theirs", 1, {{{0.1}}}, "team"));
  request.set_run("theirs");
  response = queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kNotFound) << response.status();
  response = queries::ListAlarms(*store_, "team", request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->alarms_size(), 1);
}

TEST_F(AlarmMonitorTest, ListAlarmsFiltersByStateAndPages) {
  StartMonitor({Collapse()});
  Store(MakeStep("r", 1, {{{0.1}, {0.1}}}));
  Store(MakeStep("r", 2, {{{0.9}, {0.1}}}));  // resolves layer 0

  pb::ListAlarmsRequest request;
  request.set_state(pb::ALARM_STATE_FIRING);
  absl::StatusOr<pb::ListAlarmsResponse> response =
      queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->alarms_size(), 1);
  EXPECT_EQ(response->alarms(0).layer(), 1);
  EXPECT_EQ(response->alarms(0).state(), pb::ALARM_STATE_FIRING);
  EXPECT_FALSE(response->alarms(0).has_resolved_step());

  request.set_state(pb::ALARM_STATE_RESOLVED);
  response = queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->alarms_size(), 1);
  EXPECT_EQ(response->alarms(0).layer(), 0);
  EXPECT_EQ(response->alarms(0).state(), pb::ALARM_STATE_RESOLVED);
  EXPECT_EQ(response->alarms(0).resolved_step(), 2);

  // By revision: the resolution gave layer 0's alarm the latest one.
  request = {};
  request.set_limit(1);
  response = queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->alarms_size(), 1);
  EXPECT_EQ(response->alarms(0).layer(), 1);
  EXPECT_TRUE(response->more());
  request.set_since_revision(response->alarms(0).revision());
  request.set_limit(0);
  request.set_run("r");
  response = queries::ListAlarms(*store_, storage::kDefaultNamespace, request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->alarms_size(), 1);
  EXPECT_EQ(response->alarms(0).layer(), 0);
  EXPECT_EQ(response->alarms(0).state(), pb::ALARM_STATE_RESOLVED);
  EXPECT_FALSE(response->more());

  // Another namespace sees none of them.
  response = queries::ListAlarms(*store_, "team", pb::ListAlarmsRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->alarms_size(), 0);
}

}  // namespace
}  // namespace anisoscope::server
