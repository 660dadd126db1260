#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <tuple>
#include <vector>

#include "storage/metrics_store.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::storage {
namespace {

using testing::MakeStep;
using testing::RawCount;
using testing::SyntheticValue;
using testing::TempDir;

class ResultsTest : public testing::StoreTest {
 protected:
  int64_t Rows(const std::string& table) {
    return RawCount(path_, "SELECT COUNT(*) FROM " + table);
  }
};

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

TEST_F(ResultsTest, ScalarsAndVectorsRoundTripExactly) {
  const StepResult step = MakeStep("bert-s0", "p1", 2000);
  ASSERT_OK(store_->WriteStep(step, false));

  for (const ScalarValue& scalar : step.scalars) {
    SeriesQuery query{"bert-s0", "", scalar.metric, scalar.layer, scalar.head};
    auto series = store_->QuerySeries(query);
    ASSERT_OK(series.status());
    EXPECT_EQ(series->probe_id, "p1");
    ASSERT_EQ(series->points.size(), 1u) << scalar.metric;
    EXPECT_EQ(series->points[0].step, 2000);
    EXPECT_TRUE(SameBits(series->points[0].value, scalar.value)) << scalar.metric;
  }
  for (const VectorValue& vector : step.vectors) {
    auto vectors = store_->QueryVectors({"bert-s0", "p1", vector.kind, vector.layer, vector.head});
    ASSERT_OK(vectors.status());
    ASSERT_EQ(vectors->points.size(), 1u);
    ASSERT_EQ(vectors->points[0].values.size(), vector.values.size());
    for (size_t d = 0; d < vector.values.size(); ++d) {
      EXPECT_TRUE(SameBits(vectors->points[0].values[d], vector.values[d]));
    }
  }
  EXPECT_EQ(Rows("series"), static_cast<int64_t>(step.scalars.size()));
  EXPECT_EQ(Rows("vectors"), static_cast<int64_t>(step.vectors.size()));
  EXPECT_EQ(Rows("metrics"), 9);
}

TEST_F(ResultsTest, NanScalarReadsBackAsNan) {
  StepResult step = MakeStep("r", "p", 1);
  step.scalars[0].value = std::nan("");
  ASSERT_OK(store_->WriteStep(step, false));
  auto series = store_->QuerySeries({"r", "p", step.scalars[0].metric, 0, 0});
  ASSERT_OK(series.status());
  ASSERT_EQ(series->points.size(), 1u);
  EXPECT_TRUE(std::isnan(series->points[0].value));
}

TEST_F(ResultsTest, PointsAreOrderedByLayerHeadStepAndFiltered) {
  for (int64_t step : {300, 100, 200})
    ASSERT_OK(store_->WriteStep(MakeStep("r", "p", step), false));

  auto all = store_->QuerySeries({"r", "", "q_norm"});
  ASSERT_OK(all.status());
  ASSERT_EQ(all->points.size(), 2u * 3u * 3u);
  for (size_t i = 1; i < all->points.size(); ++i) {
    const SeriesPoint& a = all->points[i - 1];
    const SeriesPoint& b = all->points[i];
    EXPECT_LT(std::tie(a.layer, a.head, a.step), std::tie(b.layer, b.head, b.step));
  }
  EXPECT_TRUE(SameBits(all->points[0].value, SyntheticValue(100, 1, 0, 0)));

  auto layer = store_->QuerySeries({"r", "", "q_norm", 1});
  ASSERT_OK(layer.status());
  EXPECT_EQ(layer->points.size(), 3u * 3u);
  for (const SeriesPoint& point : layer->points) EXPECT_EQ(point.layer, 1);

  auto head = store_->QuerySeries({"r", "", "q_norm", std::nullopt, 2, 150, 300});
  ASSERT_OK(head.status());
  ASSERT_EQ(head->points.size(), 2u * 2u);
  for (const SeriesPoint& point : head->points) {
    EXPECT_EQ(point.head, 2);
    EXPECT_GE(point.step, 150);
  }

  auto hidden = store_->QuerySeries({"r", "p", "hidden_anisotropy", 2, std::nullopt, 200, 200});
  ASSERT_OK(hidden.status());
  ASSERT_EQ(hidden->points.size(), 1u);
  EXPECT_EQ(hidden->points[0].head, -1);
  EXPECT_TRUE(SameBits(hidden->points[0].value, SyntheticValue(200, 10, 2, -1)));

  auto vectors = store_->QueryVectors({"r", "", "k_mean", 1, 2, std::nullopt, 250});
  ASSERT_OK(vectors.status());
  ASSERT_EQ(vectors->points.size(), 2u);
  EXPECT_EQ(vectors->points[0].step, 100);
  EXPECT_EQ(vectors->points[1].step, 200);
}

TEST_F(ResultsTest, SeriesAreCountedPerLayerAndHeadBeforeAnyIsReadAndALimitStopsTheRead) {
  for (int64_t step : {300, 100, 200})
    ASSERT_OK(store_->WriteStep(MakeStep("r", "p", step), false));

  auto counts = store_->CountSeries({"r", "", "q_norm"});
  ASSERT_OK(counts.status());
  EXPECT_EQ(counts->probe_id, "p");
  ASSERT_EQ(counts->series.size(), 2u * 3u);
  for (size_t i = 0; i < counts->series.size(); ++i) {
    EXPECT_EQ(counts->series[i].layer, static_cast<int>(i / 3));
    EXPECT_EQ(counts->series[i].head, static_cast<int>(i % 3));
    EXPECT_EQ(counts->series[i].points, 3);
  }
  auto narrow = store_->CountSeries({"r", "", "q_norm", 1, std::nullopt, 150});
  ASSERT_OK(narrow.status());
  ASSERT_EQ(narrow->series.size(), 3u);
  EXPECT_EQ(narrow->series[0].points, 2);
  SeriesQuery none{"r", "", "q_norm"};
  none.after_step = std::numeric_limits<int64_t>::max();
  ASSERT_OK(store_->CountSeries(none).status());
  EXPECT_TRUE(store_->CountSeries(none)->series.empty());
  EXPECT_EQ(store_->CountSeries({"r", "", "no_such_metric"}).status().code(),
            absl::StatusCode::kInvalidArgument);

  SeriesQuery limited{"r", "", "q_norm"};
  limited.limit = 5;
  auto stopped = store_->QuerySeries(limited);
  ASSERT_OK(stopped.status());
  EXPECT_EQ(stopped->points.size(), 5u);
  EXPECT_TRUE(stopped->more);
  limited.limit = 18;
  auto whole = store_->QuerySeries(limited);
  ASSERT_OK(whole.status());
  EXPECT_EQ(whole->points.size(), 18u);
  EXPECT_FALSE(whole->more);
}

TEST_F(ResultsTest, VectorsPastMaxValuesAreCountedAndNoneIsRead) {
  for (int64_t step : {300, 100, 200})
    ASSERT_OK(store_->WriteStep(MakeStep("r", "p", step), false));
  VectorQuery query{"r", "", "k_mean", 1, 2};
  query.max_values = 11;  // 3 steps x head_dim 4 = 12 match
  auto refused = store_->QueryVectors(query);
  ASSERT_OK(refused.status());
  EXPECT_EQ(refused->values, 12);
  EXPECT_TRUE(refused->points.empty());
  query.max_values = 12;
  auto read = store_->QueryVectors(query);
  ASSERT_OK(read.status());
  EXPECT_EQ(read->values, 12);
  EXPECT_EQ(read->points.size(), 3u);
}

TEST_F(ResultsTest, ListRunsReportsArchitectureProbesAndDistinctSteps) {
  ASSERT_OK(store_->WriteStep(MakeStep("b", "p1", 20), false));
  ASSERT_OK(store_->WriteStep(MakeStep("b", "p2", 20), false));
  ASSERT_OK(store_->WriteStep(MakeStep("b", "p1", 10), false));
  ASSERT_OK(store_->WriteStep(MakeStep("a", "p1", 5, 1, 1, 2), false));
  auto runs = store_->ListRuns("default");
  ASSERT_OK(runs.status());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].name, "a");
  EXPECT_EQ((*runs)[0].num_layers, 1);
  const RunInfo& b = (*runs)[1];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.model_family, "bert");
  EXPECT_EQ(b.num_layers, 2);
  EXPECT_EQ(b.num_heads, 3);
  EXPECT_EQ(b.head_dim, 4);
  EXPECT_EQ(b.steps, (std::vector<int64_t>{10, 20}));
  ASSERT_EQ(b.probes.size(), 2u);
  EXPECT_EQ(b.probes[0].id, "p1");
  EXPECT_EQ(b.probes[0].description, "probe p1");
  EXPECT_EQ(b.probes[0].num_samples, 16);
  EXPECT_EQ(b.probes[0].num_tokens, 2048);
  EXPECT_EQ(b.created_at.size(), 24u) << b.created_at;  // 2024-01-02T03:04:05.678Z
  EXPECT_EQ(b.created_at.back(), 'Z');
  EXPECT_EQ(b.created_at[10], 'T');
}

// Probes are per namespace: another namespace's step under the same probe id (a collision,
// or the same probe) neither overwrites this one's description nor counts as its step.
TEST_F(ResultsTest, TwoNamespacesWithTheSameProbeIdKeepTheirOwnProbe) {
  StepResult a = MakeStep("r", "p1", 10);
  a.ns = "team-a";
  a.probe.description = "team-a's probe";
  ASSERT_OK(store_->WriteStep(a, false));
  StepResult b = MakeStep("r", "p1", 10);
  b.ns = "team-b";
  b.probe = {"p1", "team-b's probe", 1, 3};
  ASSERT_OK(store_->WriteStep(b, false));
  EXPECT_EQ(Rows("probes"), 2);
  auto runs_a = store_->ListRuns("team-a");
  ASSERT_OK(runs_a.status());
  ASSERT_EQ(runs_a->size(), 1u);
  ASSERT_EQ((*runs_a)[0].probes.size(), 1u);
  EXPECT_EQ((*runs_a)[0].probes[0].description, "team-a's probe");
  EXPECT_EQ((*runs_a)[0].probes[0].num_tokens, 2048);
  auto runs_b = store_->ListRuns("team-b");
  ASSERT_OK(runs_b.status());
  EXPECT_EQ((*runs_b)[0].probes[0].description, "team-b's probe");
  EXPECT_FALSE(*store_->HasStep("team-c", "r", "p1", 10));
}

TEST_F(ResultsTest, GetRunReadsOneRunsShapeAndNamesTheOthersWhenUnknown) {
  ASSERT_OK(store_->WriteStep(MakeStep("b", "p1", 20), false));
  ASSERT_OK(store_->WriteStep(MakeStep("a", "p1", 5, 1, 1, 2), false));
  auto run = store_->GetRun("default", "b");
  ASSERT_OK(run.status());
  EXPECT_EQ(run->name, "b");
  EXPECT_EQ(run->model_family, "bert");
  EXPECT_EQ((std::vector<int>{run->num_layers, run->num_heads, run->head_dim}),
            (std::vector<int>{2, 3, 4}));
  EXPECT_TRUE(run->steps.empty() && run->probes.empty());  // not read
  auto unknown = store_->GetRun("default", "c");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("known runs: a, b"), absl::string_view::npos)
      << unknown.status();
  EXPECT_EQ(store_->GetRun("elsewhere", "b").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ResultsTest, EmptyProbeIdPicksTheOnlyProbeAndRefusesSeveral) {
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p1", 1), false));
  auto only = store_->QuerySeries({"r", "", "q_norm"});
  ASSERT_OK(only.status());
  EXPECT_EQ(only->probe_id, "p1");

  ASSERT_OK(store_->WriteStep(MakeStep("r", "p2", 1), false));
  auto several = store_->QuerySeries({"r", "", "q_norm"});
  EXPECT_EQ(several.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(several.status().message(),
            "run 'r' has several probes (p1, p2); name one with --probe ID (Python: probe=; "
            "HTTP: probe_id=)");
  EXPECT_EQ(store_->QueryVectors({"r", "", "q_mean"}).status().code(),
            absl::StatusCode::kFailedPrecondition);

  auto named = store_->QuerySeries({"r", "p2", "q_norm"});
  ASSERT_OK(named.status());
  EXPECT_EQ(named->probe_id, "p2");
}

TEST_F(ResultsTest, UnknownRunProbeMetricAndKindAreReportedWithWhatExists) {
  ASSERT_OK(store_->WriteStep(MakeStep("alpha", "p1", 1), false));
  ASSERT_OK(store_->WriteStep(MakeStep("beta", "p1", 1), false));

  auto run = store_->QuerySeries({"gamma", "", "q_norm"});
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(run.status().message().find("gamma"), absl::string_view::npos) << run.status();
  EXPECT_NE(run.status().message().find("alpha, beta"), absl::string_view::npos) << run.status();

  auto probe = store_->QuerySeries({"alpha", "p9", "q_norm"});
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(probe.status().message().find("p9"), absl::string_view::npos) << probe.status();

  auto metric = store_->QuerySeries({"alpha", "", "q_normm"});
  EXPECT_EQ(metric.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(metric.status().message().find("q_normm"), absl::string_view::npos);
  EXPECT_NE(metric.status().message().find("hidden_anisotropy"), absl::string_view::npos)
      << metric.status();

  auto kind = store_->QueryVectors({"alpha", "", "v_mean"});
  EXPECT_EQ(kind.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(kind.status().message().find("k_mean, q_mean"), absl::string_view::npos)
      << kind.status();

  EXPECT_EQ(store_->QueryVectors({"nope", "", "q_mean"}).status().code(),
            absl::StatusCode::kNotFound);
  // A known kind at a missing position is simply empty.
  auto empty = store_->QueryVectors({"alpha", "", "q_mean", 99, 0});
  ASSERT_OK(empty.status());
  EXPECT_TRUE(empty->points.empty());
}

TEST_F(ResultsTest, ExistingStepWithoutReplaceIsAlreadyExistsAndChangesNothing) {
  const StepResult first = MakeStep("r", "p", 7);
  ASSERT_OK(store_->WriteStep(first, false));
  StepResult second = MakeStep("r", "p", 7);
  for (ScalarValue& scalar : second.scalars) scalar.value += 1;
  second.scalars.push_back({"brand_new_metric", 0, 0, 1.0});

  const absl::Status status = store_->WriteStep(second, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_EQ(Rows("steps"), 1);
  EXPECT_EQ(Rows("series"), static_cast<int64_t>(first.scalars.size()));
  EXPECT_EQ(Rows("metrics"), 9);
  auto series = store_->QuerySeries({"r", "", "q_norm", 0, 0});
  ASSERT_OK(series.status());
  EXPECT_TRUE(SameBits(series->points[0].value, first.scalars[6].value));
}

TEST_F(ResultsTest, ReplaceOverwritesTheStepWithoutDuplicateRows) {
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 7), false));
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 8), false));
  StepResult replacement = MakeStep("r", "p", 7);
  replacement.scalars.resize(10);  // fewer rows than before: leftovers would show
  replacement.vectors.resize(3);
  for (ScalarValue& scalar : replacement.scalars) scalar.value = 42.5;
  ASSERT_OK(store_->WriteStep(replacement, true));

  const StepResult full = MakeStep("r", "p", 8);
  EXPECT_EQ(Rows("steps"), 2);
  EXPECT_EQ(Rows("series"), static_cast<int64_t>(full.scalars.size()) + 10);
  EXPECT_EQ(Rows("vectors"), static_cast<int64_t>(full.vectors.size()) + 3);
  auto series = store_->QuerySeries({"r", "", "qk_mean_cosine", 0, 0, 7, 7});
  ASSERT_OK(series.status());
  ASSERT_EQ(series->points.size(), 1u);
  EXPECT_EQ(series->points[0].value, 42.5);
}

TEST_F(ResultsTest, WriteFailingMidwayLeavesTheDatabaseExactlyAsBefore) {
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 1), false));
  const int64_t steps = Rows("steps"), series = Rows("series"), vectors = Rows("vectors");

  // Replacing step 1 deletes it first; a duplicate key in the last scalar fails after the
  // delete and every other insert, a new metric name included.
  StepResult bad = MakeStep("r", "p", 1);
  bad.scalars.insert(bad.scalars.begin(), {"only_in_failed_write", 0, 0, 1.0});
  bad.scalars.push_back(bad.scalars[5]);
  const absl::Status status = store_->WriteStep(bad, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("UNIQUE"), absl::string_view::npos) << status;

  // A duplicate vector fails after a new run, a new probe and all scalars were inserted.
  StepResult bad_vector = MakeStep("other", "p2", 2);
  bad_vector.vectors.push_back(bad_vector.vectors.back());
  EXPECT_FALSE(store_->WriteStep(bad_vector, false).ok());

  EXPECT_EQ(Rows("steps"), steps);
  EXPECT_EQ(Rows("series"), series);
  EXPECT_EQ(Rows("vectors"), vectors);
  EXPECT_EQ(Rows("metrics"), 9);
  EXPECT_EQ(Rows("runs"), 1);
  EXPECT_EQ(Rows("probes"), 1);
  auto query = store_->QuerySeries({"r", "", "q_norm", 0, 0});
  ASSERT_OK(query.status());
  ASSERT_EQ(query->points.size(), 1u);
  EXPECT_TRUE(SameBits(query->points[0].value, SyntheticValue(1, 1, 0, 0)));
  // The store is still usable after the rollback.
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 2), false));
}

TEST_F(ResultsTest, DifferentArchitectureForAStoredRunIsInvalidArgument) {
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 1, 2, 3, 4), false));
  const absl::Status status = store_->WriteStep(MakeStep("r", "p", 2, 2, 4, 4), false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("3 heads"), absl::string_view::npos) << status;
  EXPECT_EQ(Rows("steps"), 1);
}

TEST_F(ResultsTest, EmptyRunOrProbeIsInvalidArgument) {
  EXPECT_EQ(store_->WriteStep(MakeStep("", "p", 1), false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->WriteStep(MakeStep("r", "", 1), false).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ResultsTest, HasStepSeesOnlyStoredSteps) {
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 5), false));
  EXPECT_TRUE(*store_->HasStep("default", "r", "p", 5));
  EXPECT_FALSE(*store_->HasStep("default", "r", "p", 6));
  EXPECT_FALSE(*store_->HasStep("default", "r", "q", 5));
  EXPECT_FALSE(*store_->HasStep("default", "s", "p", 5));
}

TEST_F(ResultsTest, TwoStoresOnOneFileSeeEachOthersWrites) {
  auto other = MetricsStore::Open({path_, 10000});
  ASSERT_OK(other.status());
  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 1), false));
  ASSERT_OK((*other)->WriteStep(MakeStep("r", "p", 2), false));
  EXPECT_TRUE(*(*other)->HasStep("default", "r", "p", 1));
  EXPECT_TRUE(*store_->HasStep("default", "r", "p", 2));
  EXPECT_EQ(store_->WriteStep(MakeStep("r", "p", 2), false).code(),
            absl::StatusCode::kAlreadyExists);

  // Interleaved writers on separate connections wait for each other's lock.
  std::thread a([&] {
    for (int64_t s = 10; s < 30; ++s) EXPECT_OK(store_->WriteStep(MakeStep("r", "p", s), false));
  });
  std::thread b([&] {
    for (int64_t s = 30; s < 50; ++s) {
      EXPECT_OK((*other)->WriteStep(MakeStep("r", "p", s), false));
    }
  });
  a.join();
  b.join();
  auto runs = (*other)->ListRuns("default");
  ASSERT_OK(runs.status());
  EXPECT_EQ((*runs)[0].steps.size(), 42u);
}

TEST_F(ResultsTest, ConcurrentWritesFromFourThreadsAllLand) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 25; ++i) {
        EXPECT_OK(
            store_->WriteStep(MakeStep("run" + std::to_string(t % 2), "p", t * 100 + i), false));
        EXPECT_OK(store_->QuerySeries({"run" + std::to_string(t % 2), "", "q_norm"}).status());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(Rows("steps"), 100);
  EXPECT_EQ(Rows("runs"), 2);
  EXPECT_EQ(Rows("series"), 100 * static_cast<int64_t>(MakeStep("r", "p", 0).scalars.size()));
}

TEST_F(ResultsTest, WriteStepTimeFor12x12Step) {
  constexpr int kSteps = 20;
  std::vector<StepResult> steps;
  for (int i = 0; i < kSteps; ++i) steps.push_back(MakeStep("bert-base", "p", i, 12, 12, 64));
  ASSERT_EQ(steps[0].scalars.size(), 12u * 12u * 7u + 13u * 2u);
  ASSERT_EQ(steps[0].vectors.size(), 288u);
  double worst_ms = 0, total_ms = 0;
  for (const StepResult& step : steps) {
    const auto start = std::chrono::steady_clock::now();
    ASSERT_OK(store_->WriteStep(step, false));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    worst_ms = std::max(worst_ms, ms);
    total_ms += ms;
  }
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(store_->WriteStep(steps[3], true));
  const double replace_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "[ timing ] WriteStep 12x12 (1034 scalars, 288 vectors of 64): mean %.2f ms, "
      "worst %.2f ms over %d steps; replace %.2f ms\n",
      total_ms / kSteps, worst_ms, kSteps, replace_ms);
}

TEST_F(ResultsTest, DataVersionChangesWithEveryCommitOfAnyConnectionAndOnlyThen) {
  auto version = [&] {
    absl::StatusOr<int64_t> v = store_->DataVersion();
    EXPECT_TRUE(v.ok()) << v.status();
    return v.value_or(-1);
  };
  const int64_t start = version();
  ASSERT_OK(store_->ListRuns("").status());
  EXPECT_EQ(version(), start) << "a read changed the version";

  ASSERT_OK(store_->WriteStep(MakeStep("r", "p", 1), false));
  const int64_t written = version();
  EXPECT_NE(written, start) << "this store's own write went unnoticed";
  EXPECT_EQ(version(), written);

  // Another process's store on the same file (as the CLI or a second server would be).
  auto other = MetricsStore::Open({path_});
  ASSERT_OK(other.status());
  ASSERT_OK((*other)->WriteStep(MakeStep("r", "p", 2), false));
  EXPECT_NE(version(), written) << "another connection's write went unnoticed";
}

}  // namespace
}  // namespace anisoscope::storage
