// The alarms table and the metric history the alarm rules read (storage/alarm_table.h),
// through MetricsStore over a real SQLite file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "storage/metrics_store.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::storage {
namespace {

using testing::MakeStep;
using testing::RawCount;
using testing::SyntheticValue;

constexpr int kAttnEntropy = 3;  // index of attn_entropy in testing::kHeadMetrics

class AlarmTableTest : public testing::StoreTest {
 protected:
  // Stores one step of `run` so that alarms can refer to the run.
  void StoreRun(const std::string& run, const std::string& ns = kDefaultNamespace, int64_t step = 1,
                const std::string& probe = "p") {
    StepResult result = MakeStep(run, probe, step);
    result.ns = ns;
    ASSERT_OK(store_->WriteStep(result, false));
  }

  static AlarmRecord Fired(const std::string& run, const std::string& rule, int layer, int64_t step,
                           const std::string& ns = kDefaultNamespace,
                           const std::string& probe = "p") {
    AlarmRecord alarm;
    alarm.ns = ns;
    alarm.run = run;
    alarm.probe_id = probe;
    alarm.rule = rule;
    alarm.metric = "attn_entropy";
    alarm.layer = layer;
    alarm.step = step;
    alarm.value = 0.25;
    alarm.reference = 0.5;
    alarm.severity = "critical";
    alarm.summary = "min attn_entropy is 0.25";
    return alarm;
  }

  std::vector<AlarmRecord> Record(const std::vector<AlarmRecord>& fired,
                                  const std::vector<AlarmRecord>& resolved = {}) {
    absl::StatusOr<std::vector<AlarmRecord>> changed = store_->RecordAlarms(fired, resolved);
    EXPECT_TRUE(changed.ok()) << changed.status();
    return changed.ok() ? *changed : std::vector<AlarmRecord>{};
  }

  static AlarmRecord Resolution(AlarmRecord alarm, int64_t step) {
    alarm.resolved_step = step;
    return alarm;
  }

  AlarmList List(const AlarmQuery& query) {
    absl::StatusOr<AlarmList> list = store_->ListAlarms(query);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? *list : AlarmList{};
  }

  static std::vector<int64_t> Ids(const AlarmList& list) {
    std::vector<int64_t> ids;
    for (const AlarmRecord& alarm : list.alarms) ids.push_back(alarm.id);
    return ids;
  }
};

bool IsIsoUtc(const std::string& text) {
  static const std::regex kIso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)");
  return std::regex_match(text, kIso);
}

TEST_F(AlarmTableTest, MigrationCreatesAnEmptyAlarmsTable) {
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM alarms"), 0);
}

TEST_F(AlarmTableTest, RecordAlarmsSetsIdsFiredAtAndIncreasingRevisions) {
  StoreRun("r");
  const std::vector<AlarmRecord> first = Record({Fired("r", "a", 0, 10), Fired("r", "a", 1, 10)});
  ASSERT_EQ(first.size(), 2u);
  const std::vector<AlarmRecord> second = Record({Fired("r", "b", -1, 11)});
  ASSERT_EQ(second.size(), 1u);

  const std::vector<AlarmRecord> all = {first[0], first[1], second[0]};
  for (size_t i = 0; i < all.size(); ++i) {
    const AlarmRecord& alarm = all[i];
    EXPECT_GT(alarm.id, 0);
    EXPECT_TRUE(IsIsoUtc(alarm.fired_at)) << alarm.fired_at;
    EXPECT_FALSE(alarm.resolved_step.has_value());
    EXPECT_EQ(alarm.resolved_at, "");
    EXPECT_EQ(alarm.ns, kDefaultNamespace);
    EXPECT_EQ(alarm.run, "r");
    EXPECT_EQ(alarm.probe_id, "p");
    EXPECT_EQ(alarm.metric, "attn_entropy");
    EXPECT_EQ(alarm.value, 0.25);
    EXPECT_EQ(alarm.reference, 0.5);
    EXPECT_EQ(alarm.severity, "critical");
    EXPECT_EQ(alarm.summary, "min attn_entropy is 0.25");
    if (i > 0) {
      EXPECT_GT(alarm.revision, all[i - 1].revision);
      EXPECT_NE(alarm.id, all[i - 1].id);
    }
  }
  EXPECT_EQ(first[0].layer, 0);
  EXPECT_EQ(first[1].layer, 1);
  EXPECT_EQ(second[0].rule, "b");
  EXPECT_EQ(second[0].layer, -1);
  EXPECT_EQ(second[0].step, 11);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM alarms"), 3);
}

TEST_F(AlarmTableTest, ResolvingBumpsTheRevision) {
  StoreRun("r");
  const std::vector<AlarmRecord> fired = Record({Fired("r", "a", 0, 10), Fired("r", "a", 1, 10)});
  ASSERT_EQ(fired.size(), 2u);

  const std::vector<AlarmRecord> resolved = Record({}, {Resolution(fired[0], 12)});
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].id, fired[0].id);
  EXPECT_EQ(resolved[0].step, 10);
  EXPECT_EQ(resolved[0].resolved_step, 12);
  EXPECT_TRUE(IsIsoUtc(resolved[0].resolved_at)) << resolved[0].resolved_at;
  EXPECT_EQ(resolved[0].fired_at, fired[0].fired_at);
  EXPECT_GT(resolved[0].revision, fired[1].revision);

  // Open at step 13: only the firing one (the resolved one's span is 10..12).
  auto firing = store_->AlarmsOpenAt(kDefaultNamespace, "r", "p", 13);
  ASSERT_OK(firing.status());
  ASSERT_EQ(firing->size(), 1u);
  EXPECT_EQ((*firing)[0].id, fired[1].id);

  // Resolving it again at the same step changes nothing and returns nothing.
  EXPECT_TRUE(Record({}, {Resolution(fired[0], 12)}).empty());
  const AlarmList list = List({kDefaultNamespace, "", false});
  ASSERT_EQ(list.alarms.size(), 1u);
  EXPECT_EQ(list.alarms[0].resolved_step, 12);
  EXPECT_EQ(list.alarms[0].revision, resolved[0].revision);
}

TEST_F(AlarmTableTest, ResolutionMovesOrReopensWithANewRevision) {
  StoreRun("r");
  const std::vector<AlarmRecord> fired = Record({Fired("r", "a", 0, 10)});
  ASSERT_EQ(fired.size(), 1u);
  const std::vector<AlarmRecord> at14 = Record({}, {Resolution(fired[0], 14)});
  ASSERT_EQ(at14.size(), 1u);

  const std::vector<AlarmRecord> at12 = Record({}, {Resolution(fired[0], 12)});
  ASSERT_EQ(at12.size(), 1u);
  EXPECT_EQ(at12[0].resolved_step, 12);
  EXPECT_GT(at12[0].revision, at14[0].revision);

  AlarmRecord reopen = fired[0];
  reopen.resolved_step.reset();
  const std::vector<AlarmRecord> reopened = Record({}, {reopen});
  ASSERT_EQ(reopened.size(), 1u);
  EXPECT_FALSE(reopened[0].resolved_step.has_value());
  EXPECT_EQ(reopened[0].resolved_at, "");
  EXPECT_GT(reopened[0].revision, at12[0].revision);
  EXPECT_TRUE(Record({}, {reopen}).empty());  // already firing
  EXPECT_EQ(List({kDefaultNamespace, "r", true}).alarms.size(), 1u);
}

TEST_F(AlarmTableTest, FiringTheSameEventAgainUpdatesItInPlace) {
  StoreRun("r");
  const std::vector<AlarmRecord> first = Record({Fired("r", "a", 0, 10)});
  ASSERT_EQ(first.size(), 1u);
  const std::vector<AlarmRecord> resolved = Record({}, {Resolution(first[0], 20)});
  ASSERT_EQ(resolved.size(), 1u);

  // The same (run, probe, rule, layer, step), recomputed: one row, new values and revision,
  // the same id, fired_at and resolution.
  AlarmRecord again = Fired("r", "a", 0, 10);
  again.value = 0.125;
  again.summary = "min attn_entropy is 0.125";
  const std::vector<AlarmRecord> refired = Record({again});
  ASSERT_EQ(refired.size(), 1u);
  EXPECT_EQ(refired[0].id, first[0].id);
  EXPECT_EQ(refired[0].value, 0.125);
  EXPECT_EQ(refired[0].summary, "min attn_entropy is 0.125");
  EXPECT_EQ(refired[0].fired_at, first[0].fired_at);
  EXPECT_EQ(refired[0].resolved_step, 20);
  EXPECT_EQ(refired[0].resolved_at, resolved[0].resolved_at);
  EXPECT_GT(refired[0].revision, resolved[0].revision);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM alarms"), 1);
  // Pollers see it again.
  EXPECT_EQ(Ids(List({kDefaultNamespace, "r", std::nullopt, resolved[0].revision})),
            (std::vector<int64_t>{first[0].id}));

  // Another layer, step, rule or probe is another event.
  StoreRun("r", kDefaultNamespace, 1, "q");
  EXPECT_EQ(Record({Fired("r", "a", 1, 10), Fired("r", "a", 0, 11), Fired("r", "b", 0, 10),
                    Fired("r", "a", 0, 10, kDefaultNamespace, "q")})
                .size(),
            4u);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM alarms"), 5);
}

TEST_F(AlarmTableTest, AlarmsOpenAtHoldsFiringAndResolvedAroundTheStep) {
  StoreRun("r");
  const std::vector<AlarmRecord> fired =
      Record({Fired("r", "a", 0, 10), Fired("r", "a", 1, 10), Fired("r", "a", 2, 30)});
  ASSERT_EQ(fired.size(), 3u);
  Record({}, {Resolution(fired[0], 20)});  // layer 0: 10..20; layer 1 firing since 10
  const auto open_ids = [&](int64_t step) {
    std::vector<int64_t> ids;
    auto open = store_->AlarmsOpenAt(kDefaultNamespace, "r", "p", step);
    EXPECT_TRUE(open.ok()) << open.status();
    if (open.ok()) {
      for (const AlarmRecord& alarm : *open) ids.push_back(alarm.id);
      std::sort(ids.begin(), ids.end());
    }
    return ids;
  };
  EXPECT_EQ(open_ids(9), (std::vector<int64_t>{fired[1].id, fired[2].id}));
  EXPECT_EQ(open_ids(10), (std::vector<int64_t>{fired[0].id, fired[1].id, fired[2].id}));
  EXPECT_EQ(open_ids(20), (std::vector<int64_t>{fired[0].id, fired[1].id, fired[2].id}));
  EXPECT_EQ(open_ids(21), (std::vector<int64_t>{fired[1].id, fired[2].id}));
}

TEST_F(AlarmTableTest, FiredAndResolvedInOneCallAreReturnedByRevision) {
  StoreRun("r");
  const std::vector<AlarmRecord> fired = Record({Fired("r", "a", 0, 10)});
  ASSERT_EQ(fired.size(), 1u);
  const std::vector<AlarmRecord> changed =
      Record({Fired("r", "a", 0, 14)}, {Resolution(fired[0], 12)});
  ASSERT_EQ(changed.size(), 2u);
  EXPECT_LT(changed[0].revision, changed[1].revision);
  EXPECT_EQ(changed[0].id, fired[0].id);
  EXPECT_EQ(changed[0].resolved_step, 12);
  EXPECT_EQ(changed[1].step, 14);
  EXPECT_FALSE(changed[1].resolved_step.has_value());
}

TEST_F(AlarmTableTest, AlarmOfUnknownRunIsNotFoundAndNothingIsStored) {
  StoreRun("r");
  auto changed = store_->RecordAlarms({Fired("r", "a", 0, 10), Fired("ghost", "a", 0, 10)}, {});
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kNotFound) << changed.status();
  EXPECT_NE(changed.status().message().find("ghost"), std::string::npos) << changed.status();
  // One transaction: the first alarm is not stored either.
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM alarms"), 0);
}

TEST_F(AlarmTableTest, AlarmsOpenAtFiltersByRunAndProbe) {
  StoreRun("r");
  StoreRun("r", kDefaultNamespace, 1, "q");
  StoreRun("s");
  Record({Fired("r", "a", 0, 10), Fired("r", "a", 0, 10, kDefaultNamespace, "q"),
          Fired("s", "a", 0, 10)});
  auto firing = store_->AlarmsOpenAt(kDefaultNamespace, "r", "p", 10);
  ASSERT_OK(firing.status());
  ASSERT_EQ(firing->size(), 1u);
  EXPECT_EQ((*firing)[0].probe_id, "p");
  EXPECT_EQ((*firing)[0].run, "r");

  auto unknown = store_->AlarmsOpenAt(kDefaultNamespace, "ghost", "p", 10);
  ASSERT_OK(unknown.status());
  EXPECT_TRUE(unknown->empty());
}

TEST_F(AlarmTableTest, ListAlarmsFiltersByRunStateAndRevision) {
  StoreRun("r");
  StoreRun("s");
  const std::vector<AlarmRecord> fired =
      Record({Fired("r", "a", 0, 10), Fired("s", "a", 0, 10), Fired("r", "b", -1, 10)});
  ASSERT_EQ(fired.size(), 3u);
  const std::vector<AlarmRecord> resolved = Record({}, {Resolution(fired[0], 11)});
  ASSERT_EQ(resolved.size(), 1u);

  // Every alarm, by revision: the resolved one now last.
  EXPECT_EQ(Ids(List({kDefaultNamespace})),
            (std::vector<int64_t>{fired[1].id, fired[2].id, fired[0].id}));
  EXPECT_EQ(Ids(List({kDefaultNamespace, "r"})), (std::vector<int64_t>{fired[2].id, fired[0].id}));
  EXPECT_EQ(Ids(List({kDefaultNamespace, "", true})),
            (std::vector<int64_t>{fired[1].id, fired[2].id}));
  EXPECT_EQ(Ids(List({kDefaultNamespace, "r", false})), (std::vector<int64_t>{fired[0].id}));
  EXPECT_EQ(Ids(List({kDefaultNamespace, "s", false})), (std::vector<int64_t>{}));
  EXPECT_TRUE(List({kDefaultNamespace, "ghost"}).alarms.empty());

  // since_revision: only what changed after it (the resolution counts as a change).
  EXPECT_EQ(Ids(List({kDefaultNamespace, "", std::nullopt, fired[2].revision})),
            (std::vector<int64_t>{fired[0].id}));
  EXPECT_TRUE(List({kDefaultNamespace, "", std::nullopt, resolved[0].revision}).alarms.empty());
}

TEST_F(AlarmTableTest, ListAlarmsLimitSetsMore) {
  StoreRun("r");
  std::vector<AlarmRecord> fired;
  for (int layer = 0; layer < 5; ++layer) fired.push_back(Fired("r", "a", layer, 10));
  fired = Record(fired);
  ASSERT_EQ(fired.size(), 5u);

  AlarmList page = List({kDefaultNamespace, "", std::nullopt, 0, 2});
  EXPECT_EQ(Ids(page), (std::vector<int64_t>{fired[0].id, fired[1].id}));
  EXPECT_TRUE(page.more);
  // The next page from the last revision seen.
  page = List({kDefaultNamespace, "", std::nullopt, page.alarms.back().revision, 2});
  EXPECT_EQ(Ids(page), (std::vector<int64_t>{fired[2].id, fired[3].id}));
  EXPECT_TRUE(page.more);
  page = List({kDefaultNamespace, "", std::nullopt, page.alarms.back().revision, 2});
  EXPECT_EQ(Ids(page), (std::vector<int64_t>{fired[4].id}));
  EXPECT_FALSE(page.more);

  page = List({kDefaultNamespace, "", std::nullopt, 0, 5});
  EXPECT_EQ(page.alarms.size(), 5u);
  EXPECT_FALSE(page.more);
  page = List({kDefaultNamespace, "", std::nullopt, 0, 0});  // 0: the default, 1000
  EXPECT_EQ(page.alarms.size(), 5u);
  EXPECT_FALSE(page.more);
}

TEST_F(AlarmTableTest, NamespacesSeparateRunsOfTheSameName) {
  StoreRun("r", kDefaultNamespace);
  StoreRun("r", "team");
  const std::vector<AlarmRecord> fired =
      Record({Fired("r", "a", 0, 10, kDefaultNamespace), Fired("r", "a", 0, 10, "team")});
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[0].ns, kDefaultNamespace);
  EXPECT_EQ(fired[1].ns, "team");

  EXPECT_EQ(Ids(List({kDefaultNamespace, "r"})), (std::vector<int64_t>{fired[0].id}));
  const AlarmList team = List({"team"});
  ASSERT_EQ(team.alarms.size(), 1u);
  EXPECT_EQ(team.alarms[0].id, fired[1].id);
  EXPECT_EQ(team.alarms[0].ns, "team");
  EXPECT_TRUE(List({"other"}).alarms.empty());

  auto firing = store_->AlarmsOpenAt("team", "r", "p", 10);
  ASSERT_OK(firing.status());
  ASSERT_EQ(firing->size(), 1u);
  EXPECT_EQ((*firing)[0].id, fired[1].id);

  // An alarm of a run stored only in another namespace has no run to refer to.
  EXPECT_EQ(store_->RecordAlarms({Fired("r", "a", 0, 10, "other")}, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AlarmTableTest, NanValueRoundTripsAsNan) {
  StoreRun("r");
  AlarmRecord alarm = Fired("r", "a", 0, 10);
  alarm.value = std::numeric_limits<double>::quiet_NaN();
  alarm.reference = std::numeric_limits<double>::quiet_NaN();
  const std::vector<AlarmRecord> fired = Record({alarm});
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_TRUE(std::isnan(fired[0].value));
  EXPECT_TRUE(std::isnan(fired[0].reference));
  const AlarmList list = List({kDefaultNamespace});
  ASSERT_EQ(list.alarms.size(), 1u);
  EXPECT_TRUE(std::isnan(list.alarms[0].value));
}

TEST_F(AlarmTableTest, ScalarsBeforeReturnsTheLastStepsMostRecentFirst) {
  for (int64_t step : {40, 10, 30, 20, 50}) StoreRun("r", kDefaultNamespace, step);
  auto history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "attn_entropy", 40, 2);
  ASSERT_OK(history.status());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].step, 30);
  EXPECT_EQ((*history)[1].step, 20);
  for (const StepScalars& at : *history) {
    ASSERT_EQ(at.values.size(), 2u * 3u) << at.step;  // MakeStep: 2 layers x 3 heads
    size_t i = 0;
    for (int layer = 0; layer < 2; ++layer) {
      for (int head = 0; head < 3; ++head, ++i) {
        const ScalarValue& value = at.values[i];
        EXPECT_EQ(value.metric, "attn_entropy");
        EXPECT_EQ(value.layer, layer);
        EXPECT_EQ(value.head, head);
        EXPECT_EQ(value.value, SyntheticValue(at.step, kAttnEntropy, layer, head));
      }
    }
  }

  // Before a step that is not stored; more steps asked for than there are.
  history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "attn_entropy", 35, 10);
  ASSERT_OK(history.status());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].step, 30);
  EXPECT_EQ((*history)[2].step, 10);

  history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "attn_entropy", 10, 5);
  ASSERT_OK(history.status());
  EXPECT_TRUE(history->empty());
}

TEST_F(AlarmTableTest, ScalarsBeforeReadsPerHiddenStateMetrics) {
  StoreRun("r", kDefaultNamespace, 1);
  auto history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "hidden_anisotropy", 2, 1);
  ASSERT_OK(history.status());
  ASSERT_EQ(history->size(), 1u);
  ASSERT_EQ((*history)[0].values.size(), 3u);  // layers + 1 hidden states
  for (int state = 0; state < 3; ++state) {
    EXPECT_EQ((*history)[0].values[state].layer, state);
    EXPECT_EQ((*history)[0].values[state].head, -1);
    EXPECT_EQ((*history)[0].values[state].value, SyntheticValue(1, 10, state, -1));
  }
}

TEST_F(AlarmTableTest, ScalarsBeforeReadsOnlyTheProbeRunAndNamespaceAskedFor) {
  StoreRun("r", kDefaultNamespace, 10, "p");
  StoreRun("r", kDefaultNamespace, 20, "q");  // a later step of another probe
  StoreRun("s", kDefaultNamespace, 25, "p");  // of another run
  StoreRun("r", "team", 27, "p");             // of the same run name elsewhere
  auto history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "attn_entropy", 30, 1);
  ASSERT_OK(history.status());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].step, 10);

  history = store_->ScalarsBefore(kDefaultNamespace, "r", "q", "attn_entropy", 30, 5);
  ASSERT_OK(history.status());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].step, 20);

  history = store_->ScalarsBefore(kDefaultNamespace, "ghost", "p", "attn_entropy", 30, 5);
  ASSERT_OK(history.status());
  EXPECT_TRUE(history->empty());
}

TEST_F(AlarmTableTest, ScalarsBeforeLeavesOutStepsWithoutTheMetricAndNanReadsBack) {
  StepResult with = MakeStep("r", "p", 10);
  with.scalars.push_back({"hidden_max_abs", 0, -1, std::numeric_limits<double>::quiet_NaN()});
  with.scalars.push_back({"hidden_max_abs", 1, -1, 7.5});
  ASSERT_OK(store_->WriteStep(with, false));
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 20), false));  // no hidden_max_abs
  auto history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "hidden_max_abs", 30, 5);
  ASSERT_OK(history.status());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].step, 10);
  ASSERT_EQ((*history)[0].values.size(), 2u);
  EXPECT_TRUE(std::isnan((*history)[0].values[0].value));
  EXPECT_EQ((*history)[0].values[1].value, 7.5);
  // An unknown metric has no history.
  history = store_->ScalarsBefore(kDefaultNamespace, "r", "p", "no_such_metric", 30, 5);
  ASSERT_OK(history.status());
  EXPECT_TRUE(history->empty());
}

TEST_F(AlarmTableTest, DeletingTheRunsRowsLeavesNoAlarms) {
  // The alarms reference their run with ON DELETE CASCADE.
  StoreRun("r");
  Record({Fired("r", "a", 0, 10)});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(
      sqlite3_exec(db, "PRAGMA foreign_keys = ON; DELETE FROM runs;", nullptr, nullptr, &error),
      SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM alarms"), 0);
}

}  // namespace
}  // namespace anisoscope::storage
