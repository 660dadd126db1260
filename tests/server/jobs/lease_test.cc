// The lease protocol over real gRPC, played by the test as a remote worker (no embedded
// workers): expiry and attempts, stale calls, cancel, skip, restart, long polls, the
// largest upload a supported family makes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <limits>
#include <thread>

#include "absl/time/clock.h"
#include "tests/server/server_test_util.h"
#include "worker/metrics_upload.h"

namespace anisoscope::server::testing {
namespace {

using ::testing::HasSubstr;

class LeaseTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    lease_timeout_seconds_ = 0.3;
  }

  // Leases as worker `name`, waiting up to `wait_ms`; fails the test on an error.
  std::optional<pb::WorkUnit> Lease(int wait_ms = 2000, const std::string& name = "remote-1") {
    grpc::ClientContext context;
    pb::LeaseWorkRequest request;
    request.mutable_worker()->set_name(name);
    request.set_wait_ms(wait_ms);
    pb::LeaseWorkResponse response;
    const grpc::Status status = workers_->LeaseWork(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!response.has_unit()) return std::nullopt;
    return response.unit();
  }

  grpc::Status Heartbeat(const pb::WorkUnit& unit, pb::HeartbeatResponse* response,
                         const std::string& probe_id = "") {
    grpc::ClientContext context;
    pb::HeartbeatRequest request;
    request.set_lease_id(unit.lease_id());
    request.set_probe_id(probe_id);
    return workers_->Heartbeat(&context, request, response);
  }

  grpc::Status Complete(const pb::WorkUnit& unit, const analysis::CheckpointMetrics& metrics,
                        pb::CompleteWorkResponse* response, const std::string& probe_id = "") {
    grpc::ClientContext context;
    pb::CompleteWorkRequest request;
    request.set_lease_id(unit.lease_id());
    request.mutable_probe()->set_id(probe_id.empty() ? FakeProbeId(probe_) : probe_id);
    request.mutable_probe()->set_num_samples(3);
    request.mutable_probe()->set_num_tokens(21);  // FakeMetricsFor's, and the probe file's
    request.mutable_probe()->set_description("tokens probe.jsonl 3 samples");  // the worker's
    *request.mutable_metrics() = worker::ToUpload(metrics);
    return workers_->CompleteWork(&context, request, response);
  }

  int64_t SubmitSteps(const std::string& run, const std::vector<int64_t>& steps) {
    pb::Job job;
    EXPECT_TRUE(Submit(DirRequest(run, MakeCheckpoints(run, steps)), &job).ok());
    return job.id();
  }

  int StoredSteps(const std::string& run) {
    grpc::ClientContext context;
    pb::ListRunsResponse runs;
    EXPECT_TRUE(queries_->ListRuns(&context, pb::ListRunsRequest(), &runs).ok());
    for (const pb::Run& r : runs.runs()) {
      if (r.name() == run) return r.steps_size();
    }
    return 0;
  }
};

TEST_F(LeaseTest, ExpiredLeaseGoesBackWithItsAttemptCountedAndStaleCompleteWritesNothing) {
  StartServer(/*workers=*/0);
  const int64_t id = SubmitSteps("r", {100});
  std::optional<pb::WorkUnit> first = Lease();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->attempt(), 1);
  EXPECT_EQ(first->step(), 100);
  EXPECT_GT(first->probe().tokens().samples_size(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // no heartbeat: expires

  std::optional<pb::WorkUnit> second = Lease(2000, "remote-2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->attempt(), 2);
  EXPECT_NE(second->lease_id(), first->lease_id());

  pb::CompleteWorkResponse response;
  const grpc::Status stale = Complete(*first, FakeMetricsFor(root_ / "r/step_100"), &response);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(StoredSteps("r"), 0);
  pb::HeartbeatResponse beat;
  EXPECT_EQ(Heartbeat(*first, &beat).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  ASSERT_TRUE(Complete(*second, FakeMetricsFor(root_ / "r/step_100"), &response).ok());
  EXPECT_EQ(response.state(), pb::STEP_STATE_DONE);
  const pb::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.checkpoints(0).attempt(), 2);
  EXPECT_EQ(job.checkpoints(0).worker(), "remote-2");
  EXPECT_EQ(StoredSteps("r"), 1);
  // Completing again is stale too.
  EXPECT_EQ(Complete(*second, FakeMetricsFor(root_ / "r/step_100"), &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(LeaseTest, EachUnitNamesTheJobsNextCheckpointToReadAhead) {
  StartServer(/*workers=*/0);
  SubmitSteps("r", {100, 200});
  std::optional<pb::WorkUnit> first = Lease();
  ASSERT_TRUE(first.has_value());
  std::optional<pb::WorkUnit> second = Lease(2000, "remote-2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(first->step(), 100);
  EXPECT_EQ(first->next_checkpoint_path(), second->checkpoint_path());
  EXPECT_TRUE(second->next_checkpoint_path().empty());  // the job's last: nothing ahead
}

TEST_F(LeaseTest, HeartbeatsKeepALeaseAlive) {
  lease_timeout_seconds_ = 1;
  StartServer(0);
  SubmitSteps("r", {1});
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  for (int i = 0; i < 25; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pb::HeartbeatResponse beat;
    ASSERT_TRUE(Heartbeat(*unit, &beat).ok());
    EXPECT_EQ(beat.verdict(), pb::HeartbeatResponse::VERDICT_CONTINUE);
  }
  EXPECT_FALSE(Lease(0).has_value());  // still ours after 2.5 s > the 1 s timeout
}

TEST_F(LeaseTest, AttemptsExhaustedFailTheStepWithTheLastError) {
  max_attempts_ = 2;
  StartServer(0);
  const int64_t id = SubmitSteps("r", {7});
  ASSERT_TRUE(Lease().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  std::optional<pb::WorkUnit> second = Lease(2000, "remote-2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->attempt(), 2);
  const pb::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(job.checkpoints(0).state(), pb::STEP_STATE_FAILED);
  EXPECT_THAT(job.checkpoints(0).error(), HasSubstr("lease expired: worker 'remote-2'"));
  EXPECT_THAT(job.checkpoints(0).error(), HasSubstr("attempt 2 of 2"));
}

TEST_F(LeaseTest, CancelReachesTheLeaseAtItsNextHeartbeat) {
  StartServer(0);
  const int64_t id = SubmitSteps("r", {1, 2});
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  pb::Job cancelled;
  ASSERT_TRUE(CancelJob(id, &cancelled).ok());
  pb::HeartbeatResponse beat;
  ASSERT_TRUE(Heartbeat(*unit, &beat).ok());
  EXPECT_EQ(beat.verdict(), pb::HeartbeatResponse::VERDICT_CANCELLED);
  pb::CompleteWorkResponse response;
  EXPECT_EQ(Complete(*unit, FakeMetricsFor(root_ / "r/step_1"), &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  const pb::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.checkpoints(0).state(), pb::STEP_STATE_CANCELLED);
  EXPECT_EQ(StoredSteps("r"), 0);
}

TEST_F(LeaseTest, AProbeIdAlreadyStoredSkipsTheStep) {
  StartServer(0);
  SubmitSteps("r", {5});
  std::optional<pb::WorkUnit> unit = Lease();
  pb::CompleteWorkResponse response;
  ASSERT_TRUE(Complete(*unit, FakeMetricsFor(root_ / "r/step_5"), &response).ok());
  pb::Job again;
  ASSERT_TRUE(Submit(DirRequest("r", root_ / "r"), &again).ok());
  std::optional<pb::WorkUnit> repeat = Lease();
  ASSERT_TRUE(repeat.has_value());
  pb::HeartbeatResponse beat;
  ASSERT_TRUE(Heartbeat(*repeat, &beat, FakeProbeId(probe_)).ok());
  EXPECT_EQ(beat.verdict(), pb::HeartbeatResponse::VERDICT_ALREADY_STORED);
  const pb::Job job = WaitFinal(again.id());
  EXPECT_EQ(job.checkpoints(0).state(), pb::STEP_STATE_SKIPPED);
}

TEST_F(LeaseTest, ALongPollIsAnsweredWhenWorkArrives) {
  lease_timeout_seconds_ = 30;  // the unit stays leased while the second poll waits
  StartServer(0);
  std::thread submitter([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    SubmitSteps("r", {1});
  });
  const absl::Time start = absl::Now();
  std::optional<pb::WorkUnit> unit = Lease(10000);
  submitter.join();
  ASSERT_TRUE(unit.has_value());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  const absl::Time empty_start = absl::Now();
  EXPECT_FALSE(Lease(300).has_value());  // nothing left: answered empty after the wait
  EXPECT_GE(absl::Now() - empty_start, absl::Milliseconds(250));
}

TEST_F(LeaseTest, ARestartedServerHonoursARemoteLease) {
  lease_timeout_seconds_ = 30;
  StartServer(0);
  const int64_t id = SubmitSteps("r", {3});
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  StopServer();
  StartServer(0);
  EXPECT_FALSE(Lease(0).has_value());  // the step is still leased
  pb::CompleteWorkResponse response;
  ASSERT_TRUE(Complete(*unit, FakeMetricsFor(root_ / "r/step_3"), &response).ok());
  const pb::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.checkpoints(0).attempt(), 1);
  EXPECT_EQ(StoredSteps("r"), 1);
}

TEST_F(LeaseTest, AResumedJobKeepsTheProbeItWasSubmittedWith) {
  StartServer(0);
  const int64_t id = SubmitSteps("r", {3});
  const std::string probe_id = FakeProbeId(probe_);  // of the file as submitted
  StopServer();
  // The probe file changes (or goes) while the server is down.
  std::ofstream(probe_, std::ios::trunc) << "[1, 2, 3]\n";
  StartServer(0);
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  ASSERT_EQ(unit->probe().tokens().samples_size(), 3);
  EXPECT_THAT(unit->probe().tokens().samples(0).ids(),
              ::testing::ElementsAre(101, 7, 8, 9, 10, 11, 102));
  fs::remove(probe_);
  StopServer();
  StartServer(0);
  unit = Lease();
  ASSERT_TRUE(unit.has_value());  // leased again once the first lease expired
  EXPECT_EQ(unit->probe().tokens().samples_size(), 3);
  pb::CompleteWorkResponse response;
  ASSERT_TRUE(Complete(*unit, FakeMetricsFor(root_ / "r/step_3"), &response, probe_id).ok());
  EXPECT_EQ(WaitFinal(id).state(), pb::JOB_STATE_SUCCEEDED);
}

TEST_F(LeaseTest, TheLargestSupportedShapeUploadsWhole) {
  StartServer(0);
  SubmitSteps("big", {1});
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  // Pythia-12B: 36 layers x 40 heads, head_dim 128, rotary (four vector kinds): ~6 MB.
  analysis::CheckpointMetrics metrics;
  metrics.shape.family = "gpt_neox";
  metrics.shape.num_layers = 36;
  metrics.shape.num_heads = 40;
  metrics.shape.head_dim = 128;
  for (int layer = 0; layer < 36; ++layer) {
    for (int head = 0; head < 40; ++head) {
      analysis::HeadMetrics& m = metrics.heads.emplace_back();
      m.layer = layer;
      m.head = head;
      m.qk_mean_cosine = layer + head / 100.0;
      for (auto* v : {&m.q_mean, &m.k_mean, &m.q_mean_pre_rotary, &m.k_mean_pre_rotary}) {
        v->assign(128, layer * 1000.0 + head);
      }
    }
  }
  metrics.shape.hidden_size = 5120;
  for (int i = 0; i <= 36; ++i) {
    analysis::HiddenStateMetrics& m = metrics.hidden_states.emplace_back();
    m.index = i;
    m.spectrum.assign(21, 0.5);  // min(21 probe tokens, 5120)
  }
  metrics.final_norm_gain.assign(5120, 1.0);
  pb::CompleteWorkResponse response;
  const grpc::Status status = Complete(*unit, metrics, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::ClientContext context;
  pb::QueryVectorsRequest request;
  request.set_run("big");
  request.set_kind("k_mean_pre_rotary");
  request.set_layer(35);
  request.set_head(39);
  pb::QueryVectorsResponse vectors;
  ASSERT_TRUE(queries_->QueryVectors(&context, request, &vectors).ok());
  ASSERT_EQ(vectors.points_size(), 1);
  ASSERT_EQ(vectors.points(0).values_size(), 128);
  EXPECT_EQ(vectors.points(0).values(127), 35039.0);
}

// One worker identity (here every caller of a server without tokens: "anonymous") holds at
// most --max-leases-per-worker leases and waits; the next is refused naming the flag, and
// ending a lease makes room.
TEST_F(LeaseTest, AWorkerIdentityHoldsAtMostItsLeaseCap) {
  max_leases_per_worker_ = 2;
  StartServer(0);
  SubmitSteps("r", {1, 2, 3});
  std::optional<pb::WorkUnit> first = Lease(0);
  std::optional<pb::WorkUnit> second = Lease(0, "remote-2");
  ASSERT_TRUE(first.has_value() && second.has_value());
  grpc::ClientContext context;
  pb::LeaseWorkRequest request;
  request.mutable_worker()->set_name("remote-3");
  pb::LeaseWorkResponse response;
  const grpc::Status refused = workers_->LeaseWork(&context, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-leases-per-worker (2)"));
  EXPECT_FALSE(response.has_unit());
  pb::CompleteWorkResponse done;
  ASSERT_TRUE(Complete(*first, FakeMetricsFor(root_ / "r/step_1"), &done).ok());
  std::optional<pb::WorkUnit> third = Lease(0, "remote-3");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->step(), 3);
}

// A lying upload (NaN where METRICS.md promises a number; a probe id that is not the unit's)
// fails only its step and stores nothing; the job's other steps go on.
TEST_F(LeaseTest, ALyingUploadFailsOnlyItsStepAndStoresNothing) {
  StartServer(0);
  const int64_t id = SubmitSteps("r", {1, 2, 3});
  std::optional<pb::WorkUnit> nan_unit = Lease(0);
  ASSERT_TRUE(nan_unit.has_value());
  analysis::CheckpointMetrics nan = FakeMetricsFor(root_ / "r/step_1");
  nan.heads[1].attn_entropy = std::numeric_limits<double>::quiet_NaN();
  pb::CompleteWorkResponse response;
  const grpc::Status refused = Complete(*nan_unit, nan, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("'attn_entropy': value 1 is NaN"));

  std::optional<pb::WorkUnit> other_probe = Lease(0);
  ASSERT_TRUE(other_probe.has_value());
  const grpc::Status wrong_probe = Complete(*other_probe, FakeMetricsFor(root_ / "r/step_2"),
                                            &response, "p0123456789abcdef0123456789abcdef");
  EXPECT_EQ(wrong_probe.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wrong_probe.error_message(), HasSubstr("is not the id of the unit's token probe"));
  EXPECT_EQ(StoredSteps("r"), 0);

  std::optional<pb::WorkUnit> honest = Lease(0);
  ASSERT_TRUE(honest.has_value());
  ASSERT_TRUE(Complete(*honest, FakeMetricsFor(root_ / "r/step_3"), &response).ok());
  const pb::Job job = WaitFinal(id);
  EXPECT_EQ(job.checkpoints(0).state(), pb::STEP_STATE_FAILED);
  EXPECT_EQ(job.checkpoints(1).state(), pb::STEP_STATE_FAILED);
  EXPECT_EQ(job.checkpoints(2).state(), pb::STEP_STATE_DONE);
  EXPECT_EQ(StoredSteps("r"), 1);
}

// The id a lease's heartbeat reported (the one the server checked for a stored step) is the
// only one its upload may store under.
TEST_F(LeaseTest, AnUploadStoresUnderTheProbeIdItsHeartbeatReported) {
  StartServer(0);
  SubmitSteps("r", {1});
  std::optional<pb::WorkUnit> unit = Lease(0);
  ASSERT_TRUE(unit.has_value());
  pb::HeartbeatResponse beat;
  ASSERT_TRUE(Heartbeat(*unit, &beat, "pffffffffffffffffffffffffffffffff").ok());
  pb::CompleteWorkResponse response;
  const grpc::Status refused = Complete(*unit, FakeMetricsFor(root_ / "r/step_1"), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("this lease's heartbeat reported"));
  EXPECT_EQ(StoredSteps("r"), 0);
}

TEST_F(LeaseTest, AStoredProbeIsLabelledByTheServerWithItsFileSamplesAndLength) {
  StartServer(0);
  SubmitSteps("r", {1});
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  pb::CompleteWorkResponse response;
  ASSERT_TRUE(Complete(*unit, FakeMetricsFor(root_ / "r/step_1"), &response).ok());
  grpc::ClientContext context;
  pb::ListRunsResponse runs;
  ASSERT_TRUE(queries_->ListRuns(&context, pb::ListRunsRequest(), &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  ASSERT_EQ(runs.runs(0).probes_size(), 1);
  // Not the worker's text: the job's probe file, 3 samples of 7 tokens each.
  EXPECT_EQ(runs.runs(0).probes(0).description(), "probe.jsonl · 3 x 7");
}

}  // namespace
}  // namespace anisoscope::server::testing
