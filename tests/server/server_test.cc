// End to end through a real channel: an in-process server, FakeExtractors, SQLite in a
// temp file.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/metric_catalog/metric_catalog.h"
#include "storage/metrics_store.h"
#include "tests/server/server_test_util.h"

namespace anisoscope::server::testing {
namespace {

using ::testing::ElementsAre;

class ServerTest : public ServerFixture {};

std::vector<int64_t> Steps(const pb::Job& job) {
  std::vector<int64_t> steps;
  for (const pb::CheckpointStatus& c : job.checkpoints()) steps.push_back(c.step());
  return steps;
}

TEST_F(ServerTest, SubmitWatchSucceedAndQueryRoundTrip) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {100, 200, 300});
  engine_->BlockOn("step_100");
  engine_->SetBatchDelay(absl::Milliseconds(40));  // every batch's progress is seen
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("bert-seed0", dir), &job).ok());
  EXPECT_EQ(job.state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(Steps(job), (std::vector<int64_t>{100, 200, 300}));
  EXPECT_EQ(job.checkpoints(0).path(), fs::canonical(dir / "step_100").string());
  ASSERT_TRUE(engine_->WaitStarted(1));

  grpc::ClientContext context;
  pb::WatchJobRequest request;
  request.set_id(job.id());
  auto reader = jobs_->WatchJob(&context, request);
  std::vector<pb::JobEvent> events(1);
  ASSERT_TRUE(reader->Read(&events[0]));  // the snapshot: the server has subscribed
  engine_->Release();
  pb::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  ASSERT_TRUE(reader->Finish().ok());

  // Per step, in order (a worker leases the next step while its last upload is stored, so
  // steps overlap: one step's events are checked as a sequence).
  std::map<int64_t, std::vector<std::string>> by_step;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const pb::JobEvent& e = events[i];
    std::string kind = pb::JobEvent::Kind_Name(e.kind()).substr(5);
    if (e.kind() == pb::JobEvent::KIND_STEP_PROGRESS) {
      kind += " " + std::to_string(e.batches_done()) + "/" + std::to_string(e.batches_total());
    }
    if (e.kind() == pb::JobEvent::KIND_STEP_FINISHED) {
      EXPECT_EQ(e.checkpoint().state(), pb::STEP_STATE_DONE);
      kind += " " + pb::StepState_Name(e.checkpoint().state());
    }
    by_step[e.checkpoint().step()].push_back(kind);
  }
  EXPECT_EQ(events.front().kind(), pb::JobEvent::KIND_SNAPSHOT);
  EXPECT_EQ(events.back().kind(), pb::JobEvent::KIND_JOB_FINISHED);
  // Progress comes per batch (batches faster than a heartbeat's round trip may be reported
  // together), the last batch always before the step finishes.
  for (int64_t step : {100, 200, 300}) {
    std::vector<std::string>& kinds = by_step[step];
    ASSERT_GE(kinds.size(), 2u) << step;
    if (step != 100) {
      EXPECT_EQ(kinds.front(), "STEP_STARTED") << step;
      kinds.erase(kinds.begin());
    }
    EXPECT_EQ(kinds.back(), "STEP_FINISHED STEP_STATE_DONE") << step;
    kinds.pop_back();
    ASSERT_FALSE(kinds.empty()) << step;
    EXPECT_EQ(kinds.back(), "STEP_PROGRESS 3/3") << step;
    EXPECT_TRUE(std::is_sorted(kinds.begin(), kinds.end()) &&
                std::adjacent_find(kinds.begin(), kinds.end()) == kinds.end())
        << step;
  }
  EXPECT_EQ(events[0].job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(events[0].job().checkpoints(0).state(), pb::STEP_STATE_RUNNING);

  const pb::Job& final_job = events.back().job();
  EXPECT_EQ(final_job.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(final_job.steps_total(), 3);
  EXPECT_EQ(final_job.steps_finished(), 3);
  const std::string probe_id = FakeProbeId(probe_);
  for (const pb::CheckpointStatus& c : final_job.checkpoints()) {
    EXPECT_EQ(c.state(), pb::STEP_STATE_DONE);
    EXPECT_EQ(c.probe_id(), probe_id);
    EXPECT_EQ(c.size_bytes(), 1002);
  }
  pb::Job stored;
  ASSERT_TRUE(GetJob(job.id(), &stored).ok());
  EXPECT_EQ(stored.state(), pb::JOB_STATE_SUCCEEDED);

  // Runs.
  grpc::ClientContext runs_context;
  pb::ListRunsResponse runs;
  ASSERT_TRUE(queries_->ListRuns(&runs_context, pb::ListRunsRequest(), &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_EQ(runs.runs(0).name(), "bert-seed0");
  EXPECT_EQ(runs.runs(0).model_family(), "bert");
  EXPECT_EQ(runs.runs(0).num_layers(), 2);
  EXPECT_EQ(runs.runs(0).num_heads(), 2);
  EXPECT_EQ(runs.runs(0).head_dim(), 4);
  EXPECT_THAT(runs.runs(0).steps(), ElementsAre(100, 200, 300));
  ASSERT_EQ(runs.runs(0).probes_size(), 1);
  EXPECT_EQ(runs.runs(0).probes(0).id(), probe_id);
  EXPECT_EQ(runs.runs(0).probes(0).num_samples(), 3);

  // Series: one (layer, head) over the steps.
  grpc::ClientContext series_context;
  pb::QuerySeriesRequest series_request;
  series_request.set_run("bert-seed0");
  series_request.set_metric("qk_mean_cosine");
  series_request.set_layer(1);
  series_request.set_head(0);
  pb::QuerySeriesResponse series;
  ASSERT_TRUE(queries_->QuerySeries(&series_context, series_request, &series).ok());
  EXPECT_EQ(series.probe_id(), probe_id);
  ASSERT_EQ(series.points_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const int64_t step = 100 * (i + 1);
    EXPECT_EQ(series.points(i).step(), step);
    EXPECT_EQ(series.points(i).layer(), 1);
    EXPECT_EQ(series.points(i).head(), 0);
    const auto expected = FakeMetricsFor(dir / ("step_" + std::to_string(step)));
    EXPECT_DOUBLE_EQ(series.points(i).value(), expected.heads[2].qk_mean_cosine);
  }

  // Series of a per-hidden-state metric, a step range.
  grpc::ClientContext hidden_context;
  pb::QuerySeriesRequest hidden_request;
  hidden_request.set_run("bert-seed0");
  hidden_request.set_metric("hidden_anisotropy");
  hidden_request.set_from_step(200);
  pb::QuerySeriesResponse hidden;
  ASSERT_TRUE(queries_->QuerySeries(&hidden_context, hidden_request, &hidden).ok());
  EXPECT_EQ(hidden.points_size(), 3 * 2);  // indices 0..2, steps 200 and 300
  for (const pb::SeriesPoint& p : hidden.points()) EXPECT_EQ(p.head(), -1);

  // Vectors.
  grpc::ClientContext vectors_context;
  pb::QueryVectorsRequest vectors_request;
  vectors_request.set_run("bert-seed0");
  vectors_request.set_kind("k_mean");
  vectors_request.set_layer(0);
  vectors_request.set_head(1);
  pb::QueryVectorsResponse vectors;
  ASSERT_TRUE(queries_->QueryVectors(&vectors_context, vectors_request, &vectors).ok());
  ASSERT_EQ(vectors.points_size(), 3);
  const auto expected = FakeMetricsFor(dir / "step_300");
  EXPECT_EQ(vectors.points(2).step(), 300);
  ASSERT_EQ(vectors.points(2).values_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(vectors.points(2).values(i), expected.heads[1].k_mean[i]);
  }
}

TEST_F(ServerTest, QueryErrorsMapToStatusCodes) {
  StartServer();
  grpc::ClientContext c1;
  pb::QuerySeriesRequest series;
  series.set_run("nope");
  series.set_metric("qk_mean_cosine");
  pb::QuerySeriesResponse series_response;
  EXPECT_EQ(queries_->QuerySeries(&c1, series, &series_response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext c2;
  series.set_metric("");
  EXPECT_EQ(queries_->QuerySeries(&c2, series, &series_response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext c3;
  pb::QueryVectorsRequest vectors;
  vectors.set_run("nope");
  vectors.set_kind("v_mean");
  pb::QueryVectorsResponse vectors_response;
  EXPECT_EQ(queries_->QueryVectors(&c3, vectors, &vectors_response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// ListMetrics serves the catalogue (analysis/metric_catalog/metric_catalog.h) as it is, and the
// groups with their metrics.
TEST_F(ServerTest, ListMetricsServesTheCatalogue) {
  StartServer();
  grpc::ClientContext context;
  pb::ListMetricsResponse response;
  ASSERT_TRUE(queries_->ListMetrics(&context, pb::ListMetricsRequest(), &response).ok());
  const std::vector<analysis::MetricInfo>& catalog = analysis::MetricCatalog();
  ASSERT_EQ(response.metrics_size(), static_cast<int>(catalog.size()));
  std::map<std::string, pb::MetricInfo> by_name;
  for (const pb::MetricInfo& metric : response.metrics()) by_name[metric.name()] = metric;
  const pb::MetricInfo& entropy = by_name["attn_entropy"];
  EXPECT_EQ(entropy.scope(), "head");
  EXPECT_EQ(entropy.kind(), "scalar");
  EXPECT_EQ(entropy.group(), "core");
  EXPECT_EQ(entropy.families(), "all");
  EXPECT_FALSE(entropy.may_be_undefined());
  EXPECT_EQ(entropy.unit(), "nats, [0, ln n]");
  EXPECT_FALSE(entropy.definition().empty());
  EXPECT_EQ(by_name["hidden_isoscore"].scope(), "hidden_state");
  EXPECT_EQ(by_name["hidden_isoscore"].group(), "spectra");
  EXPECT_TRUE(by_name["hidden_isoscore"].may_be_undefined());
  EXPECT_EQ(by_name["qk_mean_cosine_concat"].scope(), "block");
  EXPECT_TRUE(by_name["qk_mean_cosine_concat"].derived());
  EXPECT_EQ(by_name["qk_mean_cosine"].baseline(), "head");
  EXPECT_EQ(by_name["q_mean_pre_rotary"].kind(), "vector");
  EXPECT_EQ(by_name["q_mean_pre_rotary"].families(), "rotary");
  EXPECT_TRUE(by_name["q_sample"].token_sample());
  EXPECT_EQ(by_name["final_norm_gain"].scope(), "checkpoint");
  ASSERT_EQ(response.groups_size(), static_cast<int>(analysis::AllMetricGroups().size()));
  EXPECT_EQ(response.groups(0).name(), "core");
  EXPECT_THAT(
      response.groups(1).metrics(),
      ElementsAre("attn_max_prob", "attn_min_prob", "attn_median_prob", "attn_first_token_mass"));
  int grouped = 0;
  for (const pb::MetricGroupInfo& group : response.groups()) grouped += group.metrics_size();
  EXPECT_EQ(grouped, response.metrics_size());
}

TEST_F(ServerTest, FailingCheckpointFailsOnlyThatStep) {
  StartServer(/*workers=*/2);
  const fs::path dir = MakeCheckpoints("bert", {100, 200, 300});
  engine_->FailOn("step_200");
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  pb::Job final_job = WaitFinal(job.id());
  EXPECT_EQ(final_job.state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(final_job.error(), "1 of 3 checkpoints failed");
  EXPECT_EQ(final_job.checkpoints(0).state(), pb::STEP_STATE_DONE);
  EXPECT_EQ(final_job.checkpoints(1).state(), pb::STEP_STATE_FAILED);
  EXPECT_NE(final_job.checkpoints(1).error().find("truncated"), std::string::npos);
  EXPECT_EQ(final_job.checkpoints(2).state(), pb::STEP_STATE_DONE);

  grpc::ClientContext context;
  pb::ListRunsResponse runs;
  ASSERT_TRUE(queries_->ListRuns(&context, pb::ListRunsRequest(), &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_THAT(runs.runs(0).steps(), ElementsAre(100, 300));
}

TEST_F(ServerTest, ResubmitSkipsStoredStepsAndForceRecomputes) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1, 2});
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  EXPECT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(engine_->Extracted().size(), 2u);

  MakeCheckpoints("bert", {3});
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  pb::Job again = WaitFinal(job.id());
  EXPECT_EQ(again.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(again.checkpoints(0).state(), pb::STEP_STATE_SKIPPED);
  EXPECT_EQ(again.checkpoints(1).state(), pb::STEP_STATE_SKIPPED);
  EXPECT_EQ(again.checkpoints(2).state(), pb::STEP_STATE_DONE);
  EXPECT_THAT(engine_->Extracted(), ElementsAre("step_1", "step_2", "step_3"));

  ASSERT_TRUE(Submit(DirRequest("r", dir, /*force=*/true), &job).ok());
  EXPECT_TRUE(job.force());
  pb::Job forced = WaitFinal(job.id());
  EXPECT_EQ(forced.state(), pb::JOB_STATE_SUCCEEDED);
  for (const pb::CheckpointStatus& c : forced.checkpoints()) {
    EXPECT_EQ(c.state(), pb::STEP_STATE_DONE);
  }
  EXPECT_EQ(engine_->Extracted().size(), 6u);
}

TEST_F(ServerTest, DedupeSkipsAStepWithAnEarlierStepsWeightsBeforeItsBatches) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1});
  const std::string same = "xxh3-128:" + std::string(32, 'a');
  std::ofstream(dir / "step_1" / "fingerprint") << same;
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  ASSERT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);

  MakeCheckpoints("bert", {2, 3});
  std::ofstream(dir / "step_2" / "fingerprint") << same;
  pb::SubmitJobRequest request = DirRequest("r", dir);
  request.set_dedupe(true);
  ASSERT_TRUE(Submit(request, &job).ok());
  const pb::Job deduplicated = WaitFinal(job.id());
  EXPECT_EQ(deduplicated.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(deduplicated.checkpoints(0).state(), pb::STEP_STATE_SKIPPED);  // stored
  const pb::CheckpointStatus& twin = deduplicated.checkpoints(1);
  EXPECT_EQ(twin.state(), pb::STEP_STATE_SKIPPED);
  EXPECT_EQ(twin.duplicate_of(), 1);
  EXPECT_EQ(twin.fingerprint(), same);
  EXPECT_EQ(twin.error(), "the same weights as step 1 (" + same + "): not stored (dedupe)");
  EXPECT_EQ(deduplicated.checkpoints(2).state(), pb::STEP_STATE_DONE);
  // step_2 was skipped once hashed, before its batches.
  EXPECT_THAT(engine_->Extracted(), ElementsAre("step_1", "step_3"));
}

TEST_F(ServerTest, ExplicitCheckpointListIsSortedByStep) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {5, 7});
  pb::SubmitJobRequest request = DirRequest("r", dir);
  request.clear_checkpoints_dir();
  auto* b = request.add_checkpoints();
  b->set_step(70);
  b->set_path((dir / "step_7").string());
  auto* a = request.add_checkpoints();
  a->set_step(50);
  a->set_path((dir / "step_5").string());
  pb::Job job;
  ASSERT_TRUE(Submit(request, &job).ok());
  EXPECT_EQ(Steps(job), (std::vector<int64_t>{50, 70}));
  EXPECT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);
}

TEST_F(ServerTest, CancelInterruptsRunningStepAndCancelsPending) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {100, 200, 300});
  engine_->BlockOn("step_100");
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  ASSERT_TRUE(engine_->WaitStarted(1));
  pb::Job cancelled;
  ASSERT_TRUE(CancelJob(job.id(), &cancelled).ok());
  EXPECT_EQ(cancelled.state(), pb::JOB_STATE_CANCELLED);
  pb::Job final_job = WaitFinal(job.id());
  EXPECT_EQ(final_job.state(), pb::JOB_STATE_CANCELLED);
  for (const pb::CheckpointStatus& c : final_job.checkpoints()) {
    EXPECT_EQ(c.state(), pb::STEP_STATE_CANCELLED) << c.step();
  }
  EXPECT_TRUE(engine_->Extracted().empty());
  EXPECT_EQ(engine_->Started(), 1);

  pb::Job again;
  EXPECT_EQ(CancelJob(job.id(), &again).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServerTest, WatchingFinishedJobSendsSnapshotThenFinished) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1});
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  WaitFinal(job.id());
  grpc::Status status;
  std::vector<pb::JobEvent> events = WatchAll(job.id(), &status);
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind(), pb::JobEvent::KIND_SNAPSHOT);
  EXPECT_EQ(events[1].kind(), pb::JobEvent::KIND_JOB_FINISHED);
  EXPECT_EQ(events[1].job().state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(server_->runner().NumWatchers(job.id()), 0);
}

TEST_F(ServerTest, ClientCancellingWatchUnsubscribes) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1});
  engine_->BlockOn("step_1");
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  {
    grpc::ClientContext context;
    pb::WatchJobRequest request;
    request.set_id(job.id());
    auto reader = jobs_->WatchJob(&context, request);
    pb::JobEvent event;
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_EQ(server_->runner().NumWatchers(job.id()), 1);
    context.TryCancel();
    while (reader->Read(&event)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  for (int i = 0; i < 500 && server_->runner().NumWatchers(job.id()) > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(server_->runner().NumWatchers(job.id()), 0);
  engine_->Release();
  EXPECT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);
}

TEST_F(ServerTest, WatchStreamsPastTheLimitAreRefusedNamingIt) {
  limits_.max_watch_streams = 1;
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1});
  engine_->BlockOn("step_1");
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  pb::WatchJobRequest request;
  request.set_id(job.id());
  grpc::ClientContext first_context;
  auto first = jobs_->WatchJob(&first_context, request);
  pb::JobEvent event;
  ASSERT_TRUE(first->Read(&event));  // the snapshot: the stream is open

  grpc::ClientContext second_context;
  auto second = jobs_->WatchJob(&second_context, request);
  EXPECT_FALSE(second->Read(&event));
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max-watch-streams"), std::string::npos)
      << refused.error_message();

  engine_->Release();
  while (first->Read(&event)) {
  }
  ASSERT_TRUE(first->Finish().ok());
  // The first stream ended: its place is free again.
  grpc::ClientContext third_context;
  auto third = jobs_->WatchJob(&third_context, request);
  ASSERT_TRUE(third->Read(&event));
  EXPECT_EQ(event.kind(), pb::JobEvent::KIND_SNAPSHOT);
}

TEST_F(ServerTest, SeriesQueriesPastThePointLimitAreRefusedNamingIt) {
  limits_.max_series_points = 2;
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1, 2, 3});
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  ASSERT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);
  grpc::ClientContext context;
  pb::QuerySeriesRequest request;
  request.set_run("r");
  request.set_metric("qk_mean_cosine");
  pb::QuerySeriesResponse response;
  const grpc::Status status = queries_->QuerySeries(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("--max-series-points"), std::string::npos)
      << status.error_message();
  grpc::ClientContext narrow_context;
  request.set_layer(0);
  request.set_head(0);
  request.set_from_step(2);
  EXPECT_TRUE(queries_->QuerySeries(&narrow_context, request, &response).ok());
  EXPECT_EQ(response.points_size(), 2);
}

TEST_F(ServerTest, PathsOutsideAllowedRootsArePermissionDenied) {
  StartServer();
  const fs::path inside = MakeCheckpoints("bert", {1});
  fs::create_directories(outside_ / "ckpts" / "step_1");
  std::ofstream(outside_ / "probe.jsonl") << "[1]\n";
  pb::Job job;

  EXPECT_EQ(Submit(DirRequest("r", outside_ / "ckpts"), &job).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  pb::SubmitJobRequest probe_outside = DirRequest("r", inside);
  probe_outside.mutable_probe()->set_path((outside_ / "probe.jsonl").string());
  EXPECT_EQ(Submit(probe_outside, &job).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // A symlink inside the root that points out of it.
  fs::create_directory_symlink(outside_ / "ckpts", root_ / "escape");
  EXPECT_EQ(Submit(DirRequest("r", root_ / "escape"), &job).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A step directory that is a symlink out of the root, inside an allowed directory.
  fs::create_directories(root_ / "mixed" / "step_1");
  fs::create_directory_symlink(outside_ / "ckpts" / "step_1", root_ / "mixed" / "step_2");
  grpc::Status status = Submit(DirRequest("r", root_ / "mixed"), &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  // "..": lexically inside, really outside.
  EXPECT_EQ(Submit(DirRequest("r", root_ / ".." / "outside" / "ckpts"), &job).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  pb::SubmitJobRequest list = DirRequest("r", inside);
  list.clear_checkpoints_dir();
  auto* ref = list.add_checkpoints();
  ref->set_step(1);
  ref->set_path((root_ / "escape" / "step_1").string());
  EXPECT_EQ(Submit(list, &job).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // A Hugging Face cache snapshot whose weight file links out of the root (the hub links
  // into blobs/ of the same repository); the same layout linking into its own blobs is taken.
  const fs::path cache = root_ / "models--org--name";
  fs::create_directories(cache / "refs");
  fs::create_directories(cache / "blobs");
  std::ofstream(cache / "refs" / "step100") << "abc123";
  std::ofstream(cache / "blobs" / "configblob") << "{}";
  fs::create_directories(cache / "snapshots" / "abc123");
  fs::create_symlink("../../blobs/configblob", cache / "snapshots" / "abc123" / "config.json");
  std::ofstream(outside_ / "weights") << std::string(1000, 'w');
  fs::create_symlink(outside_ / "weights", cache / "snapshots" / "abc123" / "model.safetensors");
  status = Submit(DirRequest("r", cache), &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_NE(status.error_message().find("checkpoint file"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("model.safetensors"), std::string::npos)
      << status.error_message();
  fs::remove(cache / "snapshots" / "abc123" / "model.safetensors");
  std::ofstream(cache / "blobs" / "weightsblob") << std::string(1000, 'w');
  fs::create_symlink("../../blobs/weightsblob",
                     cache / "snapshots" / "abc123" / "model.safetensors");
  EXPECT_EQ(engine_->Started(), 0);
  pb::SubmitJobRequest from_cache = DirRequest("r", cache);
  status = Submit(from_cache, &job);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job.checkpoints_size(), 1);
  if (job.checkpoints_size() == 1) {
    EXPECT_EQ(job.checkpoints(0).step(), 100);
  }
}

TEST_F(ServerTest, BadSpecsAreInvalidArgument) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1});
  pb::Job job;
  auto code = [&](const pb::SubmitJobRequest& request) {
    return Submit(request, &job).error_code();
  };
  pb::SubmitJobRequest request = DirRequest("bad name!", dir);
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("", dir);
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest(std::string(129, 'a'), dir);
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.mutable_probe()->set_source(pb::PROBE_SOURCE_UNSPECIFIED);
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.mutable_probe()->set_path("");
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.mutable_probe()->set_samples(-1);
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.mutable_probe()->set_seq_len(-5);
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.clear_checkpoints_dir();
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.add_checkpoints()->set_path((dir / "step_1").string());
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", root_);  // no step directories
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.set_checkpoints_dir("relative/path");
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  request = DirRequest("r", dir);
  request.clear_checkpoints_dir();
  for (int i = 0; i < 2; ++i) {
    auto* ref = request.add_checkpoints();
    ref->set_step(1);
    ref->set_path((dir / "step_1").string());
  }
  EXPECT_EQ(code(request), grpc::StatusCode::INVALID_ARGUMENT);
  // Missing answers as outside does: the gate is no oracle of the disk (docs/security.md).
  request = DirRequest("r", root_ / "missing");
  EXPECT_EQ(code(request), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(engine_->Started(), 0);
}

TEST_F(ServerTest, AJobComputesOnlyItsMetricGroupsAndAQueryOfAnotherNamesWhatIsStored) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1, 2});
  pb::Job job;
  pb::SubmitJobRequest request = DirRequest("core-run", dir);
  request.mutable_probe()->set_metrics("shiny");
  grpc::Status refused = Submit(request, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("probe.metrics: unknown metric group \"shiny\""),
            std::string::npos)
      << refused.error_message();

  request.mutable_probe()->set_metrics("uniformity, core");
  ASSERT_TRUE(Submit(request, &job).ok());
  EXPECT_EQ(job.probe().metrics(), "core,uniformity");  // as the server understood it
  EXPECT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);
  auto query = [&](const std::string& run, const std::string& metric,
                   pb::QuerySeriesResponse* response) {
    grpc::ClientContext context;
    pb::QuerySeriesRequest series;
    series.set_run(run);
    series.set_metric(metric);
    return queries_->QuerySeries(&context, series, response);
  };
  pb::QuerySeriesResponse core;
  // A metric no run stores yet.
  const grpc::Status unstored = query("core-run", "attn_max_prob", &core);
  EXPECT_NE(unstored.error_message().find("run 'core-run' stores no 'attn_max_prob' values"),
            std::string::npos)
      << unstored.error_message();

  ASSERT_TRUE(Submit(DirRequest("all-run", dir), &job).ok());
  EXPECT_EQ(job.probe().metrics(), "");  // all
  EXPECT_EQ(WaitFinal(job.id()).state(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(query("core-run", "attn_entropy", &core).ok());
  pb::QuerySeriesResponse all;
  ASSERT_TRUE(query("all-run", "attn_entropy", &all).ok());
  EXPECT_EQ(core.points_size(), 2 * 4);
  EXPECT_EQ(core.SerializeAsString(), all.SerializeAsString());
  ASSERT_TRUE(query("core-run", "hidden_token_uniformity", &core).ok());
  EXPECT_EQ(core.points_size(), 2 * 3);
  ASSERT_TRUE(query("all-run", "attn_max_prob", &all).ok());
  EXPECT_EQ(all.points_size(), 2 * 4);
  // Stored by another run only.
  for (const std::string metric : {"attn_max_prob", "hidden_isoscore"}) {
    const grpc::Status lacking = query("core-run", metric, &core);
    EXPECT_EQ(lacking.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(lacking.error_message().find("run 'core-run' stores no '" + metric + "' values"),
              std::string::npos)
        << lacking.error_message();
    EXPECT_NE(lacking.error_message().find("its metrics: attn_entropy, "), std::string::npos)
        << lacking.error_message();
  }
  const grpc::Status typo = query("core-run", "attn_entropi", &core);
  EXPECT_EQ(typo.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::vector<std::string> known;
  for (const analysis::MetricScope scope :
       {analysis::MetricScope::kHead, analysis::MetricScope::kHiddenState,
        analysis::MetricScope::kBlock, analysis::MetricScope::kCheckpoint}) {
    for (const std::string& name : analysis::CatalogNames(scope, analysis::MetricKind::kScalar)) {
      known.push_back(name);
    }
  }
  const std::string listed = absl::StrCat("known metrics: ", absl::StrJoin(known, ", "),
                                          " ('anisoscope metrics' defines each)");
  EXPECT_EQ(typo.error_message(),
            "unknown metric 'attn_entropi'; did you mean 'attn_entropy'? " + listed);
  const grpc::Status cosine = query("core-run", "qk_mean_cosin", &core);
  EXPECT_EQ(cosine.error_message(),
            "unknown metric 'qk_mean_cosin'; did you mean 'qk_mean_cosine'? " + listed);
  const grpc::Status far = query("core-run", "loss", &core);
  EXPECT_EQ(far.error_message(), "unknown metric 'loss'; " + listed);
}

TEST_F(ServerTest, UnknownJobIsNotFound) {
  StartServer();
  pb::Job job;
  EXPECT_EQ(GetJob(4242, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(CancelJob(4242, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status status;
  EXPECT_TRUE(WatchAll(4242, &status).empty());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, ListJobsMostRecentFirst) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {1});
  pb::Job a, b;
  ASSERT_TRUE(Submit(DirRequest("a", dir), &a).ok());
  ASSERT_TRUE(Submit(DirRequest("b", dir), &b).ok());
  WaitFinal(b.id());
  grpc::ClientContext context;
  pb::ListJobsRequest request;
  pb::ListJobsResponse response;
  ASSERT_TRUE(jobs_->ListJobs(&context, request, &response).ok());
  ASSERT_EQ(response.jobs_size(), 2);
  EXPECT_EQ(response.jobs(0).id(), b.id());
  EXPECT_EQ(response.jobs(1).id(), a.id());
  EXPECT_EQ(response.jobs(1).run(), "a");
}

TEST_F(ServerTest, RestartResumesUnfinishedJob) {
  const fs::path dir = MakeCheckpoints("bert", {100, 200, 300, 400});
  int64_t id = 0;
  {
    auto store = storage::MetricsStore::Open({db_.string()});
    ASSERT_TRUE(store.ok()) << store.status();
    storage::JobSpec spec;
    spec.run = "r";
    spec.probe_source = "tokens";
    spec.probe_path = fs::canonical(probe_).string();
    spec.probe_mode = "windows";
    for (int64_t step : {100, 200, 300, 400}) {
      spec.checkpoints.push_back(
          {step, fs::canonical(dir / ("step_" + std::to_string(step))).string()});
    }
    auto created = (*store)->CreateJob(spec, "");
    ASSERT_TRUE(created.ok()) << created.status();
    id = *created;
    ASSERT_TRUE((*store)->SetJobState(id, storage::JobState::kRunning, "").ok());
    // 100 finished before the kill.
    storage::JobCheckpoint done{100, spec.checkpoints[0].path, 1002, storage::StepState::kDone,
                                "",  FakeProbeId(probe_),      0.5};
    ASSERT_TRUE((*store)->UpdateCheckpoint(id, done).ok());
    // 200 was written, but the kill came before its checkpoint row was updated.
    const std::string path200 = spec.checkpoints[1].path;
    analysis::Probe probe;
    probe.id = FakeProbeId(probe_);
    storage::StepResult result;
    result.run = "r";
    result.probe = {probe.id, "fake", 3, 21};
    result.step = 200;
    result.checkpoint_path = path200;
    result.model_family = "bert";
    result.num_layers = 2;
    result.num_heads = 2;
    result.head_dim = 4;
    result.scalars.push_back({"qk_mean_cosine", 0, 0, 0.5});
    ASSERT_TRUE((*store)->WriteStep(result, false).ok());
    // 300 was running when the server died.
    storage::JobCheckpoint running{
        300, spec.checkpoints[2].path, 0, storage::StepState::kRunning, "", "", 0};
    ASSERT_TRUE((*store)->UpdateCheckpoint(id, running).ok());
  }

  StartServer();
  pb::Job final_job = WaitFinal(id);
  EXPECT_EQ(final_job.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(final_job.checkpoints(0).state(), pb::STEP_STATE_DONE);
  EXPECT_EQ(final_job.checkpoints(1).state(), pb::STEP_STATE_SKIPPED);
  EXPECT_EQ(final_job.checkpoints(2).state(), pb::STEP_STATE_DONE);
  EXPECT_EQ(final_job.checkpoints(3).state(), pb::STEP_STATE_DONE);
  EXPECT_THAT(engine_->Extracted(), ElementsAre("step_300", "step_400"));
}

// grpc.health.v1.Health/Check for the whole server, with hand-encoded messages (the
// request is empty; the response is field 1, varint status: 1 SERVING, 2 NOT_SERVING).
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer request, response;
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(),
      grpc::internal::RpcMethod("/grpc.health.v1.Health/Check",
                                grpc::internal::RpcMethod::NORMAL_RPC),
      &context, request, &response);
  if (!status.ok()) return -status.error_code();
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -100;
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (bytes.size() != 2 || bytes[0] != 0x08) return -101;
  return bytes[1];
}

TEST_F(ServerTest, HealthIsServingUntilDrained) {
  StartServer();
  EXPECT_EQ(HealthStatus(channel_), 1);
  server_->Drain();
  EXPECT_EQ(HealthStatus(channel_), 2);
}

TEST_F(ServerTest, DrainingRefusesJobsAndLeavesInterruptedStepPending) {
  StartServer();
  const fs::path dir = MakeCheckpoints("bert", {100, 200, 300});
  engine_->BlockOn("step_200");
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", dir), &job).ok());
  ASSERT_TRUE(engine_->WaitStarted(2));

  // A watcher of the running job is closed with UNAVAILABLE by the drain.
  grpc::ClientContext watch_context;
  pb::WatchJobRequest watch_request;
  watch_request.set_id(job.id());
  auto reader = jobs_->WatchJob(&watch_context, watch_request);
  pb::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));

  server_->Drain();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  pb::Job refused;
  EXPECT_EQ(Submit(DirRequest("r", dir), &refused).error_code(), grpc::StatusCode::UNAVAILABLE);
  pb::Job stored;
  ASSERT_TRUE(GetJob(job.id(), &stored).ok());
  EXPECT_EQ(stored.state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(stored.checkpoints(0).state(), pb::STEP_STATE_DONE);
  EXPECT_EQ(stored.checkpoints(1).state(), pb::STEP_STATE_PENDING);
  EXPECT_EQ(stored.checkpoints(2).state(), pb::STEP_STATE_PENDING);
  EXPECT_THAT(engine_->Extracted(), ElementsAre("step_100"));

  StopServer();
  engine_ = std::make_unique<FakeEngine>();
  StartServer();
  pb::Job resumed = WaitFinal(job.id());
  EXPECT_EQ(resumed.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(engine_->Extracted(), ElementsAre("step_200", "step_300"));
}

}  // namespace
}  // namespace anisoscope::server::testing
