// What one caller can make the server hold, each bounded (server/wire/request_limits.h): query
// sizes known before anything is read, watch streams per caller and per namespace with a
// bounded queue each, a probe's size at submit, and an embedded worker's unit that cannot
// complete.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/clock.h"
#include "common/message_limits.h"
#include "server/auth/bearer_token.h"
#include "server/jobs/probe_bounds.h"
#include "server/jobs/watch_streams.h"
#include "tests/server/server_test_util.h"

namespace anisoscope::server::testing {
namespace {

class RequestBoundsTest : public ServerFixture {
 protected:
  // Stores `steps` steps (100, 200, ...) of run `run` straight into the server's store:
  // 2 layers x 2 heads, head_dim 4, M = 2 token samples, 3 hidden states.
  void StoreRun(const std::string& run, int steps) {
    for (int s = 1; s <= steps; ++s) {
      storage::StepResult step;
      step.run = run;
      step.probe = {"p1", "probe", 3, 21};
      step.step = s * 100;
      step.model_family = "bert";
      step.num_layers = 2;
      step.num_heads = 2;
      step.head_dim = 4;
      for (int layer = 0; layer < 2; ++layer) {
        for (int head = 0; head < 2; ++head) {
          step.scalars.push_back({"qk_mean_cosine", layer, head, s + layer + head / 10.0});
          step.vectors.push_back({"q_mean", layer, head, {1.0 * s, 1, 0, head + 1.0}});
          step.vectors.push_back({"k_mean", layer, head, {1, 1.0 * s, layer + 1.0, 0}});
          step.vectors.push_back({"q_sample", layer, head, {1, 0, 0, s * 0.1, 0, 1, 0, 0}});
          step.vectors.push_back({"k_sample", layer, head, {0, 1, s * 0.1, 0, 1, 0, 0, 1}});
        }
      }
      for (int hidden = 0; hidden <= 2; ++hidden) {
        step.scalars.push_back({"hidden_mean_norm", hidden, -1, s + hidden * 2.0});
        step.scalars.push_back({"hidden_anisotropy", hidden, -1, s * 0.01 + hidden * 0.1});
      }
      ASSERT_TRUE(server_->store().WriteStep(step, false).ok()) << run << " step " << s;
    }
  }

  grpc::Status Series(pb::QuerySeriesRequest request, pb::QuerySeriesResponse* response) {
    grpc::ClientContext context;
    return queries_->QuerySeries(&context, request, response);
  }

  static pb::QuerySeriesRequest SeriesRequest(const std::string& run, const std::string& metric) {
    pb::QuerySeriesRequest request;
    request.set_run(run);
    request.set_metric(metric);
    return request;
  }

  static void ExpectRefusedNaming(const grpc::Status& status, const std::string& flag) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_NE(status.error_message().find(flag), std::string::npos) << status.error_message();
  }
};

TEST_F(RequestBoundsTest, SeriesAnswersAreSizedFromTheCountAndReadInPiecesWithinTheLimit) {
  StartServer(/*workers=*/0);
  StoreRun("big", 100);  // 2 layers x 2 heads: 4 series of 100 points
  // 150: read a series at a time (a layer has 200 points); 250: a layer at a time.
  for (const int64_t limit : {150, 250}) {
    limits_.max_series_points = limit;
    StopServer();
    StartServer(0);
    pb::QuerySeriesResponse response;
    const grpc::Status all = Series(SeriesRequest("big", "qk_mean_cosine"), &response);
    ExpectRefusedNaming(all, "--max-series-points");
    EXPECT_NE(all.error_message().find("400 points"), std::string::npos) << all.error_message();

    // 400 points match, but the answer (at most 4 x 12) fits.
    pb::QuerySeriesRequest downsampled = SeriesRequest("big", "qk_mean_cosine");
    downsampled.set_max_points(10);
    const grpc::Status read = Series(downsampled, &response);
    ASSERT_TRUE(read.ok()) << read.error_message();
    EXPECT_TRUE(response.downsampled());
    EXPECT_LE(response.points_size(), 48);
    int firsts = 0;
    int lasts = 0;
    for (int i = 0; i < response.points_size(); ++i) {
      const pb::SeriesPoint& point = response.points(i);
      firsts += point.step() == 100;
      lasts += point.step() == 10000;
      if (i > 0) {
        const pb::SeriesPoint& before = response.points(i - 1);
        EXPECT_LT(std::make_tuple(before.layer(), before.head(), before.step()),
                  std::make_tuple(point.layer(), point.head(), point.step()));
      }
    }
    EXPECT_EQ(firsts, 4) << limit;
    EXPECT_EQ(lasts, 4) << limit;
  }

  // One series read whole to be downsampled is bounded too.
  limits_.max_series_points = 60;
  StopServer();
  StartServer(0);
  pb::QuerySeriesResponse response;
  pb::QuerySeriesRequest one = SeriesRequest("big", "qk_mean_cosine");
  one.set_layer(1);
  one.set_head(1);
  one.set_max_points(10);
  const grpc::Status whole = Series(one, &response);
  ExpectRefusedNaming(whole, "--max-series-points");
  EXPECT_NE(whole.error_message().find("layer 1 head 1"), std::string::npos)
      << whole.error_message();
  one.set_from_step(5000);  // 51 points
  ASSERT_TRUE(Series(one, &response).ok());
  EXPECT_EQ(response.points(0).step(), 5000);
}

TEST_F(RequestBoundsTest, VectorTrajectoryTokenCloudAndBlockQueriesPastTheValueLimitAreRefused) {
  limits_.max_vector_values = 100;
  StartServer(/*workers=*/0);
  StoreRun("long", 30);  // per head and kind: 120 values of means, 240 of samples
  StoreRun("short", 6);  // 24 and 48

  pb::QueryVectorsRequest vectors;
  vectors.set_run("long");
  vectors.set_kind("q_mean");
  pb::QueryVectorsResponse vectors_response;
  {
    grpc::ClientContext context;
    ExpectRefusedNaming(queries_->QueryVectors(&context, vectors, &vectors_response),
                        "--max-vector-values");
  }
  vectors.set_to_step(2000);  // 20 steps: 80 values
  {
    grpc::ClientContext context;
    ASSERT_TRUE(queries_->QueryVectors(&context, vectors, &vectors_response).ok());
    EXPECT_EQ(vectors_response.points_size(), 20);
  }

  for (const auto& [run, ok] : {std::pair<std::string, bool>{"long", false}, {"short", true}}) {
    pb::QueryTrajectoryRequest trajectory;
    trajectory.set_run(run);
    pb::QueryTrajectoryResponse trajectory_response;
    grpc::ClientContext trajectory_context;
    const grpc::Status projected =
        queries_->QueryTrajectory(&trajectory_context, trajectory, &trajectory_response);
    if (ok) {
      EXPECT_TRUE(projected.ok()) << projected.error_message();
    } else {
      ExpectRefusedNaming(projected, "--max-vector-values");
    }

    pb::QueryTokenCloudRequest cloud;
    cloud.set_run(run);
    pb::QueryTokenCloudResponse cloud_response;
    grpc::ClientContext cloud_context;
    const grpc::Status clouded = queries_->QueryTokenCloud(&cloud_context, cloud, &cloud_response);
    if (ok) {
      EXPECT_TRUE(clouded.ok()) << clouded.error_message();
    } else {
      ExpectRefusedNaming(clouded, "--max-vector-values");
    }

    // qk_mean_cosine_concat reads every head's means of a block: 2 x 2 x 4 per step.
    pb::QuerySeriesResponse block_response;
    const grpc::Status blocks =
        Series(SeriesRequest(run, "qk_mean_cosine_concat"), &block_response);
    if (ok) {
      EXPECT_TRUE(blocks.ok()) << blocks.error_message();
      EXPECT_EQ(block_response.points_size(), 2 * 6);
    } else {
      ExpectRefusedNaming(blocks, "--max-vector-values");
    }
  }
}

TEST_F(RequestBoundsTest, CorrelationPastThePointLimitIsRefusedNamingIt) {
  limits_.max_series_points = 50;
  StartServer(/*workers=*/0);
  StoreRun("long", 30);  // 90 points of each hidden-state metric
  StoreRun("short", 6);  // 18
  for (const auto& [run, ok] : {std::pair<std::string, bool>{"long", false}, {"short", true}}) {
    pb::QueryCorrelationRequest request;
    request.set_run(run);
    pb::QueryCorrelationResponse response;
    grpc::ClientContext context;
    const grpc::Status status = queries_->QueryCorrelation(&context, request, &response);
    if (ok) {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.points_size(), 6);
    } else {
      ExpectRefusedNaming(status, "--max-series-points");
    }
  }
}

// Tokens of three callers: two in namespace team-a, one in team-b, each with a queued job.
class WatchBoundsTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    auth_ = "tokens";
    limits_.max_watch_streams_per_caller = 2;
    limits_.max_watch_streams_per_namespace = 3;
    StartServer(/*workers=*/0);  // jobs stay queued: streams stay open
    for (const auto& [name, ns] : std::vector<std::pair<std::string, std::string>>{
             {"alice", "team-a"}, {"bob", "team-a"}, {"carol", "team-b"}}) {
      const std::string token = NewBearerToken();
      storage::TokenRecord record;
      record.name = name;
      record.ns = ns;
      record.role = RoleName(Role::kWriter);
      record.sha256 = TokenSha256(token);
      ASSERT_TRUE(server_->store().CreateToken(record).ok());
      tokens_[name] = token;
    }
    for (const std::string name : {"alice", "carol"}) {
      grpc::ClientContext context;
      Authorize(&context, name);
      pb::Job job;
      const grpc::Status submitted =
          jobs_->SubmitJob(&context, DirRequest("r", MakeCheckpoints("run-" + name, {1})), &job);
      ASSERT_TRUE(submitted.ok()) << submitted.error_message();
      job_of_[name] = job.id();
    }
    job_of_["bob"] = job_of_["alice"];
  }

  void TearDown() override {
    for (auto& stream : streams_) stream.context->TryCancel();
    streams_.clear();
    ServerFixture::TearDown();
  }

  void Authorize(grpc::ClientContext* context, const std::string& name) {
    context->AddMetadata("authorization", "Bearer " + tokens_[name]);
  }

  // Opens a WatchJob stream as `name` on its namespace's job: OK once its snapshot arrived
  // (the stream stays open), else the refusal.
  grpc::Status Watch(const std::string& name) {
    Stream stream;
    stream.context = std::make_unique<grpc::ClientContext>();
    Authorize(stream.context.get(), name);
    pb::WatchJobRequest request;
    request.set_id(job_of_[name]);
    stream.reader = jobs_->WatchJob(stream.context.get(), request);
    pb::JobEvent event;
    if (stream.reader->Read(&event)) {
      EXPECT_EQ(event.kind(), pb::JobEvent::KIND_SNAPSHOT);
      streams_.push_back(std::move(stream));
      return grpc::Status::OK;
    }
    return stream.reader->Finish();
  }

  struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<pb::JobEvent>> reader;
  };
  std::map<std::string, std::string> tokens_;
  std::map<std::string, int64_t> job_of_;
  std::vector<Stream> streams_;
};

TEST_F(WatchBoundsTest, OneCallerCannotHoldEveryStreamAndANamespaceCannotEither) {
  ASSERT_TRUE(Watch("alice").ok());
  ASSERT_TRUE(Watch("alice").ok());
  const grpc::Status third = Watch("alice");
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(third.error_message().find("--max-watch-streams-per-caller"), std::string::npos)
      << third.error_message();

  // Another caller of the same namespace still gets one, until the namespace is full.
  ASSERT_TRUE(Watch("bob").ok());
  const grpc::Status full = Watch("bob");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(full.error_message().find("--max-watch-streams-per-namespace"), std::string::npos)
      << full.error_message();

  // Another namespace is not starved.
  EXPECT_TRUE(Watch("carol").ok());

  // A closed stream gives its place back.
  streams_.front().context->TryCancel();
  pb::JobEvent event;
  while (streams_.front().reader->Read(&event)) {
  }
  streams_.front().reader->Finish();
  streams_.erase(streams_.begin());
  grpc::Status again;
  for (int i = 0; i < 200; ++i) {
    again = Watch("alice");
    if (again.ok()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
}

TEST(WatchSlotsTest, ARefusedStreamTakesNoPlace) {
  RequestLimits limits;
  limits.max_watch_streams = 3;
  limits.max_watch_streams_per_caller = 2;
  limits.max_watch_streams_per_namespace = 3;
  WatchSlots slots(limits);
  ASSERT_TRUE(slots.Acquire("a", "x").ok());
  ASSERT_TRUE(slots.Acquire("a", "x").ok());
  EXPECT_EQ(slots.Acquire("a", "y").code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(slots.Acquire("b", "y").ok());
  const absl::Status server_full = slots.Acquire("c", "z");
  EXPECT_NE(server_full.message().find("--max-watch-streams)"), std::string::npos)
      << server_full.message();
  EXPECT_EQ(slots.open(), 3);
  slots.Release("a", "x");
  EXPECT_TRUE(slots.Acquire("c", "z").ok());
}

pb::JobEvent Progress(int i, pb::JobEvent::Kind kind = pb::JobEvent::KIND_STEP_PROGRESS) {
  pb::JobEvent event;
  event.set_kind(kind);
  event.mutable_job()->set_id(1);
  event.mutable_job()->set_steps_finished(i);
  event.set_batches_done(i);
  return event;
}

TEST(JobEventQueueTest, AReaderThatFallsBehindGetsTheLatestStateInBoundedMemory) {
  JobEventQueue queue;
  for (int i = 1; i <= 1000; ++i) {
    queue.Push(Progress(i));
    ASSERT_LE(queue.size(), JobEventQueue::kMaxWaiting + 1);
  }
  EXPECT_GT(queue.coalesced(), 0);
  EXPECT_EQ(queue.front().batches_done(), 1);  // the one perhaps being written stays
  int snapshots = 0;
  int last = 0;
  while (!queue.empty()) {
    const pb::JobEvent& event = queue.front();
    snapshots += event.kind() == pb::JobEvent::KIND_SNAPSHOT;
    EXPECT_GT(event.job().steps_finished(), last);  // in order, never older
    last = event.job().steps_finished();
    queue.Pop();
  }
  EXPECT_GT(snapshots, 0);
  EXPECT_EQ(last, 1000);  // the newest state arrives

  // JOB_FINISHED is never dropped: it follows the snapshot it arrives with.
  for (int i = 1; i <= static_cast<int>(JobEventQueue::kMaxWaiting) + 1; ++i) {
    queue.Push(Progress(i));
  }
  queue.Push(Progress(100, pb::JobEvent::KIND_JOB_FINISHED));
  ASSERT_EQ(queue.size(), 3u);
  queue.Pop();
  EXPECT_EQ(queue.front().kind(), pb::JobEvent::KIND_SNAPSHOT);
  EXPECT_EQ(queue.front().job().steps_finished(), 100);
  queue.Pop();
  EXPECT_EQ(queue.front().kind(), pb::JobEvent::KIND_JOB_FINISHED);
  queue.Pop();

  // Big events (a followed job of many steps) are bounded by their bytes too.
  for (int i = 1; i <= 100; ++i) {
    pb::JobEvent event = Progress(i);
    event.mutable_job()->set_error(std::string(1 << 20, 'x'));
    queue.Push(event);
    size_t bytes = 0;
    for (JobEventQueue copy = queue; !copy.empty(); copy.Pop()) {
      bytes += copy.front().ByteSizeLong();
    }
    // The front and the bound (a snapshot comes in place of the waiting ones).
    ASSERT_LE(bytes, JobEventQueue::kMaxWaitingBytes + (1u << 20) + 1024) << i;
  }
}

TEST_F(RequestBoundsTest, ProbesPastTheTokenLimitAreRefusedAtSubmitNamingIt) {
  limits_.max_probe_tokens = 20;
  StartServer(/*workers=*/0);
  const fs::path dir = MakeCheckpoints("bert", {1});
  pb::Job job;

  // The fixture's probe holds 21 token ids in 3 samples: the read stops at the bound.
  pb::SubmitJobRequest all = DirRequest("r", dir);
  all.mutable_probe()->set_samples(3);
  const grpc::Status read = Submit(all, &job);
  ExpectRefusedNaming(read, "--max-probe-tokens");
  EXPECT_NE(read.error_message().find("line 3"), std::string::npos) << read.error_message();

  // Refused before any file is read: more samples than tokens allowed, or samples x seq_len.
  pb::SubmitJobRequest many = DirRequest("r", dir);
  many.mutable_probe()->set_samples(21);
  many.mutable_probe()->set_path((root_ / "absent.jsonl").string());
  ExpectRefusedNaming(Submit(many, &job), "--max-probe-tokens");
  pb::SubmitJobRequest text = DirRequest("r", dir);
  text.mutable_probe()->set_source(pb::PROBE_SOURCE_TEXT);
  text.mutable_probe()->set_samples(3);
  text.mutable_probe()->set_seq_len(7);
  ExpectRefusedNaming(Submit(text, &job), "--max-probe-tokens");

  // A line longer than the bound allows is not read whole.
  std::ofstream(root_ / "long.jsonl") << "[" << std::string(1 << 20, ' ') << "1]\n";
  pb::SubmitJobRequest long_line = DirRequest("r", dir);
  long_line.mutable_probe()->set_samples(3);
  long_line.mutable_probe()->set_path((root_ / "long.jsonl").string());
  ExpectRefusedNaming(Submit(long_line, &job), "--max-probe-tokens");

  // Within the bound: seq_len cuts each sample before it is counted.
  pb::SubmitJobRequest cut = DirRequest("r", dir);
  cut.mutable_probe()->set_samples(3);
  cut.mutable_probe()->set_seq_len(6);
  const grpc::Status fits = Submit(cut, &job);
  EXPECT_TRUE(fits.ok()) << fits.error_message();
}

TEST(ProbeBoundsTest, AUnitThatCannotFitAMessageIsRefusedNamingTheLimit) {
  pb::UnitProbe probe;
  pb::TokenSample* sample = probe.mutable_tokens()->add_samples();
  const int64_t ids = kMaxMessageBytes / 8;  // 9-byte varints each: past the limit
  for (int64_t i = 0; i < ids; ++i) sample->add_ids(int64_t{1} << 62);
  const absl::Status refused = CheckUnitProbe(probe, /*max_tokens=*/ids);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("gRPC message"), std::string::npos) << refused.message();
  EXPECT_EQ(CheckUnitProbe(probe, ids - 1).code(), absl::StatusCode::kResourceExhausted);
  sample->mutable_ids()->Truncate(1000);
  EXPECT_TRUE(CheckUnitProbe(probe, ids).ok());
}

TEST_F(RequestBoundsTest, AnEmbeddedUnitThatCannotCompleteFailsInsteadOfRunningForever) {
  lease_timeout_seconds_ = 0.5;
  max_attempts_ = 2;
  engine_->HugeUploadOn("step_1");
  StartServer(/*workers=*/1);
  pb::Job job;
  ASSERT_TRUE(Submit(DirRequest("r", MakeCheckpoints("bert", {1})), &job).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    ASSERT_TRUE(GetJob(job.id(), &job).ok());
    if (job.state() == pb::JOB_STATE_FAILED || job.state() == pb::JOB_STATE_SUCCEEDED) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(job.state(), pb::JOB_STATE_FAILED) << "the step stayed running";
  ASSERT_EQ(job.checkpoints_size(), 1);
  EXPECT_EQ(job.checkpoints(0).state(), pb::STEP_STATE_FAILED);
  EXPECT_NE(job.checkpoints(0).error().find("embedded worker"), std::string::npos)
      << job.checkpoints(0).error();
  EXPECT_EQ(job.checkpoints(0).attempt(), 2);
}

}  // namespace
}  // namespace anisoscope::server::testing
