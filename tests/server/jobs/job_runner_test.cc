// JobRunner tested directly, without gRPC: a real SQLite store behind a JobStore that can
// hold a call or refuse it, to show what the runner does while the store answers (no lock
// held), when the store refuses a lease, when a cancel comes during a grant's write, and what
// a restart keeps.
#include "server/jobs/job_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;
using storage::JobState;
using storage::StepState;

// The real store, with two seams: a running checkpoint's write and HasStep can be held until
// the test lets them go, or refused once.
class HeldJobStore final : public storage::JobStore {
 public:
  explicit HeldJobStore(storage::MetricsStore* store) : store_(store) {}

  // The next write of a running checkpoint (a grant) waits in `entered`/`release`.
  void HoldNextGrant() { hold_grant_ = true; }
  void RefuseNextGrant() { refuse_grant_ = true; }
  void HoldNextHasStep() { hold_has_step_ = true; }
  absl::Notification entered;
  absl::Notification release;

  absl::StatusOr<int64_t> CreateJob(const storage::JobSpec& spec,
                                    const std::string& unit_probe) override {
    return store_->CreateJob(spec, unit_probe);
  }
  absl::StatusOr<storage::JobRecord> GetJob(int64_t id) override { return store_->GetJob(id); }
  absl::StatusOr<std::optional<std::string>> JobProbe(int64_t id) override {
    return store_->JobProbe(id);
  }
  absl::StatusOr<std::vector<storage::JobRecord>> ListJobs(int limit, const std::string& ns,
                                                           const std::string& run) override {
    return store_->ListJobs(limit, ns, run);
  }
  absl::StatusOr<std::vector<int64_t>> UnfinishedJobs() override {
    return store_->UnfinishedJobs();
  }
  absl::StatusOr<std::string> AddJobCheckpoints(
      int64_t job_id, const std::vector<storage::CheckpointSpec>& checkpoints) override {
    return store_->AddJobCheckpoints(job_id, checkpoints);
  }
  absl::StatusOr<std::string> SetJobState(int64_t id, JobState state,
                                          const std::string& error) override {
    return store_->SetJobState(id, state, error);
  }
  absl::StatusOr<std::string> UpdateCheckpoint(int64_t job_id,
                                               const storage::JobCheckpoint& checkpoint) override {
    if (checkpoint.state == StepState::kRunning) {
      if (refuse_grant_.exchange(false)) return absl::ResourceExhaustedError("disk full");
      if (hold_grant_.exchange(false)) Hold();
    }
    return store_->UpdateCheckpoint(job_id, checkpoint);
  }
  absl::StatusOr<storage::FinishedLease> FinishLease(int64_t job_id, const std::string& lease_id,
                                                     const storage::JobCheckpoint& checkpoint,
                                                     const storage::StepResult& result,
                                                     storage::StoreMode mode) override {
    return store_->FinishLease(job_id, lease_id, checkpoint, result, mode);
  }
  absl::StatusOr<bool> HasStep(const std::string& ns, const std::string& run,
                               const std::string& probe_id, int64_t step) override {
    if (hold_has_step_.exchange(false)) Hold();
    return store_->HasStep(ns, run, probe_id, step);
  }
  absl::StatusOr<int64_t> EarlierStepWithFingerprint(const std::string& ns,
                                                     const std::string& run,
                                                     const std::string& fingerprint,
                                                     int64_t step) override {
    return store_->EarlierStepWithFingerprint(ns, run, fingerprint, step);
  }
  absl::Status AppendAudit(const storage::AuditEntry& entry) override {
    return store_->AppendAudit(entry);
  }

 private:
  void Hold() {
    entered.Notify();
    release.WaitForNotification();
  }

  storage::MetricsStore* const store_;
  std::atomic<bool> hold_grant_{false};
  std::atomic<bool> refuse_grant_{false};
  std::atomic<bool> hold_has_step_{false};
};

// A lease call's answer, from whichever thread gives it.
struct Answer {
  absl::Notification done;
  absl::StatusOr<pb::LeaseWorkResponse> response = absl::UnknownError("no answer");
  JobRunner::LeaseCallback callback() {
    return [this](absl::StatusOr<pb::LeaseWorkResponse> answer) {
      response = std::move(answer);
      done.Notify();
    };
  }
};

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::MetricsStore::Open({dir_.File("metrics.db")});
    ASSERT_OK(store.status());
    store_ = std::move(store).value();
    held_ = std::make_unique<HeldJobStore>(store_.get());
  }

  void StartRunner(std::vector<JobRunner::ResumedJob> resumed = {}) {
    JobRunner::Options options;
    options.lease_timeout = absl::Seconds(30);
    auto runner = JobRunner::Create(options, held_.get(), std::move(resumed));
    ASSERT_OK(runner.status());
    runner_ = std::move(runner).value();
  }

  static storage::JobSpec Spec(const std::vector<int64_t>& steps) {
    storage::JobSpec spec;
    spec.run = "r";
    spec.probe_source = "tokens";
    spec.probe_path = "/nowhere/probe.jsonl";  // never opened by the runner
    for (int64_t step : steps) spec.checkpoints.push_back({step, "/nowhere/step" + std::to_string(step)});
    return spec;
  }

  static JobRunner::JobInputs Inputs() {
    JobRunner::JobInputs inputs;
    inputs.probe.set_samples(1);
    inputs.probe.mutable_tokens()->add_samples()->add_ids(101);
    inputs.roots = {"/nowhere"};
    return inputs;
  }

  int64_t Submit(const std::vector<int64_t>& steps) {
    auto job = runner_->Submit(Spec(steps), Inputs(), "tester");
    EXPECT_OK(job.status());
    return job.ok() ? job->id : 0;
  }

  void Lease(Answer* answer, const std::string& identity = "remote", int wait_ms = 0) {
    pb::LeaseWorkRequest request;
    request.mutable_worker()->set_name(identity);
    request.set_wait_ms(wait_ms);
    runner_->Lease(runner_->NewLeaseTicket(), request, {identity}, answer->callback());
  }

  // A lease as embedded worker `worker` (its process's name) takes it.
  void LeaseEmbedded(Answer* answer, const std::string& worker) {
    pb::LeaseWorkRequest request;
    request.mutable_worker()->set_name(worker);
    runner_->Lease(runner_->NewLeaseTicket(), request,
                   {"embedded", storage::kAnyNamespace, /*local=*/true}, answer->callback());
  }

  StepState StateOf(int64_t id, size_t index) {
    auto job = runner_->Get(id);
    EXPECT_OK(job.status());
    return job->checkpoints.at(index).state;
  }

  storage::testing::TempDir dir_;
  std::unique_ptr<storage::MetricsStore> store_;
  std::unique_ptr<HeldJobStore> held_;
  std::unique_ptr<JobRunner> runner_;
};

TEST_F(JobRunnerTest, AGrantIsStoredWithoutHoldingTheLock) {
  StartRunner();
  const int64_t id = Submit({1, 2});
  held_->HoldNextGrant();
  Answer first;
  std::thread leasing([&] { Lease(&first); });
  held_->entered.WaitForNotification();
  // The grant's write is held: every call that takes the runner's lock still answers.
  EXPECT_EQ(runner_->CurrentLoad().active_leases, 1);
  EXPECT_EQ(StateOf(id, 0), StepState::kRunning);
  Answer second;
  Lease(&second, "remote-2");
  ASSERT_TRUE(second.done.HasBeenNotified());
  ASSERT_OK(second.response.status());
  EXPECT_EQ(second.response->unit().step(), 2);
  EXPECT_FALSE(first.done.HasBeenNotified());
  held_->release.Notify();
  leasing.join();
  ASSERT_OK(first.response.status());
  EXPECT_EQ(first.response->unit().step(), 1);
  EXPECT_GT(first.response->unit().lease_deadline_unix_ms(), 0);
  EXPECT_EQ(first.response->unit().allowed_roots_size(), 1);
  EXPECT_EQ(store_->GetJob(id)->checkpoints[0].lease_id, first.response->unit().lease_id());
}

TEST_F(JobRunnerTest, AHeartbeatAsksTheStoreWithoutHoldingTheLock) {
  StartRunner();
  const int64_t id = Submit({1});
  Answer leased;
  Lease(&leased);
  ASSERT_OK(leased.response.status());
  held_->HoldNextHasStep();
  absl::StatusOr<pb::HeartbeatResponse> beat;
  std::thread beating([&] {
    pb::HeartbeatRequest request;
    request.set_lease_id(leased.response->unit().lease_id());
    request.set_probe_id("p64be0000000000000000");
    beat = runner_->Heartbeat(request, "remote");
  });
  held_->entered.WaitForNotification();
  EXPECT_EQ(StateOf(id, 0), StepState::kRunning);
  EXPECT_EQ(runner_->CurrentLoad().active_leases, 1);
  held_->release.Notify();
  beating.join();
  ASSERT_OK(beat.status());
  EXPECT_EQ(beat->verdict(), pb::HeartbeatResponse::VERDICT_CONTINUE);
}

TEST_F(JobRunnerTest, ALeaseTheStoreRefusesPutsTheStepBackAsItWas) {
  StartRunner();
  const int64_t id = Submit({1});
  held_->RefuseNextGrant();
  Answer refused;
  Lease(&refused);
  EXPECT_EQ(refused.response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.response.status().message().find("disk full"), std::string::npos);
  auto job = runner_->Get(id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->checkpoints[0].state, StepState::kPending);
  EXPECT_EQ(job->checkpoints[0].attempt, 0);
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(runner_->CurrentLoad().active_leases, 0);
  Answer again;
  Lease(&again);
  ASSERT_OK(again.response.status());
  EXPECT_EQ(again.response->unit().attempt(), 1);
  EXPECT_EQ(store_->GetJob(id)->state, JobState::kRunning);
}

TEST_F(JobRunnerTest, ACancelDuringAGrantsWriteEndsItsLeaseWithNoUnit) {
  StartRunner();
  const int64_t id = Submit({1, 2});
  held_->HoldNextGrant();
  Answer leased;
  std::thread leasing([&] { Lease(&leased); });
  held_->entered.WaitForNotification();
  ASSERT_OK(runner_->Cancel(id, "tester").status());
  EXPECT_EQ(StateOf(id, 1), StepState::kCancelled);  // the pending one at once
  held_->release.Notify();
  leasing.join();
  ASSERT_OK(leased.response.status());
  EXPECT_FALSE(leased.response->has_unit());
  auto job = store_->GetJob(id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->state, JobState::kCancelled);
  EXPECT_EQ(job->checkpoints[0].state, StepState::kCancelled);
  EXPECT_EQ(job->checkpoints[0].lease_id, "");
  EXPECT_EQ(runner_->CurrentLoad().active_leases, 0);
}

TEST_F(JobRunnerTest, ARestartGivesEmbeddedLeasesBackAndKeepsRemoteOnes) {
  auto id = store_->CreateJob(Spec({1, 2}), Inputs().probe.SerializeAsString());
  ASSERT_OK(id.status());
  storage::JobCheckpoint embedded{1, "/nowhere/step1", 0, StepState::kRunning};
  embedded.attempt = 1;
  embedded.lease_id = "embedded-lease";
  embedded.lease_local = true;
  ASSERT_OK(store_->UpdateCheckpoint(*id, embedded).status());
  storage::JobCheckpoint remote{2, "/nowhere/step2", 0, StepState::kRunning};
  remote.attempt = 1;
  remote.lease_id = "remote-lease";
  remote.lease_holder = "remote";
  ASSERT_OK(store_->UpdateCheckpoint(*id, remote).status());
  JobRunner::ResumedJob resumed;
  resumed.record = *store_->GetJob(*id);
  resumed.inputs = Inputs();
  std::vector<JobRunner::ResumedJob> jobs;
  jobs.push_back(std::move(resumed));
  StartRunner(std::move(jobs));
  auto job = runner_->Get(*id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->checkpoints[0].state, StepState::kPending);
  EXPECT_EQ(job->checkpoints[0].attempt, 0);
  EXPECT_EQ(job->checkpoints[1].state, StepState::kRunning);
  EXPECT_EQ(runner_->CurrentLoad().active_leases, 1);
  // The remote holder may go on; another identity may not.
  pb::HeartbeatRequest beat;
  beat.set_lease_id("remote-lease");
  EXPECT_EQ(runner_->Heartbeat(beat, "someone-else").status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_OK(runner_->Heartbeat(beat, "remote").status());
}

TEST_F(JobRunnerTest, ACancelNamesTheEmbeddedWorkersRunningTheJobAndNoOther) {
  StartRunner();
  std::set<std::string> told;
  runner_->SetLocalCancelListener([&](const std::set<std::string>& workers) { told = workers; });
  const int64_t cancelled = Submit({1});
  const int64_t other = Submit({2});
  Answer first, second;
  LeaseEmbedded(&first, "embedded-1");
  LeaseEmbedded(&second, "embedded-2");
  ASSERT_TRUE(first.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(second.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_OK(first.response.status());
  ASSERT_EQ(first.response->unit().job_id(), cancelled);
  ASSERT_OK(runner_->Cancel(cancelled, "tester").status());
  EXPECT_EQ(told, std::set<std::string>{"embedded-1"});
  EXPECT_EQ(StateOf(other, 0), StepState::kRunning);
}

TEST_F(JobRunnerTest, AnEmbeddedWorkerThatDiedFailsOnlyItsOwnStepSayingWhy) {
  StartRunner();
  const int64_t id = Submit({1, 2});
  Answer dead, alive;
  LeaseEmbedded(&dead, "embedded-1");
  LeaseEmbedded(&alive, "embedded-2");
  ASSERT_TRUE(dead.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(alive.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  runner_->FailLocalLeases("embedded-1", "embedded worker 'embedded-1' was killed by signal 9");
  auto job = runner_->Get(id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->checkpoints[0].state, StepState::kFailed);
  EXPECT_THAT(job->checkpoints[0].error, ::testing::HasSubstr("killed by signal 9"));
  EXPECT_EQ(job->checkpoints[1].state, StepState::kRunning);
  // Twice, or for a worker holding nothing: nothing changes.
  runner_->FailLocalLeases("embedded-1", "again");
  runner_->FailLocalLeases("embedded-3", "never");
  EXPECT_EQ(runner_->Get(id)->checkpoints[1].state, StepState::kRunning);
}

}  // namespace
}  // namespace anisoscope::server
