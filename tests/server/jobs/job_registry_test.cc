// JobRegistry tested directly (a plain class: no lock, no thread), over a real SQLite store:
// each transition of a step is stored, then published to the job's watchers, in that order;
// a job leaves once its final state is stored.
#include "server/jobs/job_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "server/jobs/source_steps.h"
#include "server/wire/proto_convert.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;
using storage::JobState;
using storage::StepState;

// Records each event's kind and the job's state in the store at that moment.
class StoreCheckingWatcher final : public JobWatcher {
 public:
  explicit StoreCheckingWatcher(storage::MetricsStore* store) : store_(store) {}
  void OnEvent(const pb::JobEvent& event) override {
    kinds.push_back(event.kind());
    if (event.kind() == pb::JobEvent::KIND_STEP_FETCHING) fetching.push_back(event);
    if (event.kind() == pb::JobEvent::KIND_JOB_FINISHED) {
      stored_state_at_finish = store_->GetJob(event.job().id())->state;
    }
  }
  void OnClosed(const absl::Status&) override {}

  std::vector<pb::JobEvent::Kind> kinds;
  std::vector<pb::JobEvent> fetching;  // the KIND_STEP_FETCHING events, whole
  JobState stored_state_at_finish = JobState::kQueued;

 private:
  storage::MetricsStore* const store_;
};

class JobRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::MetricsStore::Open({dir_.File("metrics.db")});
    ASSERT_OK(store.status());
    store_ = std::move(store).value();
    JobRegistry::Options options;
    options.max_attempts = 2;
    options.lease_timeout = absl::Milliseconds(1);
    registry_ = std::make_unique<JobRegistry>(options, store_.get(), &events_);
  }

  // A job of `steps` in the store and the registry.
  int64_t AddJob(const std::vector<int64_t>& steps) {
    storage::JobSpec spec;
    spec.run = "r";
    spec.probe_source = "tokens";
    for (int64_t step : steps) spec.checkpoints.push_back({step, "/c/" + std::to_string(step)});
    auto id = store_->CreateJob(spec, "");
    EXPECT_OK(id.status());
    registry_->Add(*store_->GetJob(*id), {});
    return *id;
  }

  // A job of `checkpoints` (a remote source's: specs as a listing gives them) in the store
  // and the registry; `follow_until` set: followed until that step.
  int64_t AddSpecJob(const std::vector<storage::CheckpointSpec>& checkpoints,
                     std::optional<int64_t> follow_until = std::nullopt) {
    storage::JobSpec spec;
    spec.run = "r";
    spec.probe_source = "tokens";
    spec.checkpoints = checkpoints;
    if (follow_until.has_value()) {
      spec.follow_dir = "hub:o/m";
      spec.until_step = follow_until;
    }
    auto id = store_->CreateJob(spec, "");
    EXPECT_OK(id.status());
    registry_->Add(*store_->GetJob(*id), {});
    return *id;
  }

  // Reserves the first pending step and stores its grant as the runner would; the lease id.
  std::string Grant() {
    const std::optional<StepKey> key = registry_->FirstPending(storage::kAnyNamespace);
    EXPECT_TRUE(key.has_value());
    JobRegistry::Grant grant = registry_->Reserve(*key, {"w", false, "w", "cpu"});
    const absl::StatusOr<std::string> stored =
        store_->UpdateCheckpoint(grant.key.first, grant.checkpoint);
    bool pending = false;
    const absl::StatusOr<bool> leased =
        registry_->GrantStored(grant, stored, store_->SetJobState(grant.key.first,
                                                                  JobState::kRunning, ""),
                               &pending);
    EXPECT_TRUE(leased.ok() && *leased);
    return grant.lease_id;
  }

  storage::testing::TempDir dir_;
  std::unique_ptr<storage::MetricsStore> store_;
  JobEvents events_;
  std::unique_ptr<JobRegistry> registry_;
};

TEST_F(JobRegistryTest, AStepsEndIsStoredBeforeItIsPublishedAndTheJobLeavesOnceFinal) {
  const int64_t id = AddJob({1});
  StoreCheckingWatcher watcher(store_.get());
  events_.Subscribe(id, &watcher);
  const std::string lease = Grant();
  EXPECT_EQ(store_->GetJob(id)->checkpoints[0].lease_id, lease);
  EXPECT_FALSE(registry_->EndLease(lease, StepState::kFailed, "bad weights"));
  EXPECT_EQ(registry_->Find(id), nullptr);
  EXPECT_EQ(watcher.kinds, (std::vector<pb::JobEvent::Kind>{
                               pb::JobEvent::KIND_STEP_STARTED, pb::JobEvent::KIND_STEP_FINISHED,
                               pb::JobEvent::KIND_JOB_FINISHED}));
  EXPECT_EQ(watcher.stored_state_at_finish, JobState::kFailed);
  auto job = store_->GetJob(id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->checkpoints[0].state, StepState::kFailed);
  EXPECT_EQ(job->checkpoints[0].error, "bad weights");
  EXPECT_EQ(job->checkpoints[0].lease_id, "");
}

TEST_F(JobRegistryTest, AHeartbeatWithADownloadIsPublishedAsStepFetching) {
  const int64_t id = AddJob({7});
  StoreCheckingWatcher watcher(store_.get());
  events_.Subscribe(id, &watcher);
  const std::string lease_id = Grant();
  LeaseEntry* lease = registry_->LeaseOf(lease_id);
  ASSERT_NE(lease, nullptr);
  pb::HeartbeatRequest heartbeat;
  heartbeat.set_lease_id(lease_id);
  pb::FetchProgress* fetch = heartbeat.mutable_fetch();
  fetch->set_bytes_done(1000);
  fetch->set_bytes_total(4000);
  fetch->set_bytes_per_second(250.5);
  fetch->set_cache_bytes(9000);
  EXPECT_EQ(registry_->ApplyVerdict(lease, heartbeat, Verdict{}).verdict(),
            pb::HeartbeatResponse::VERDICT_CONTINUE);
  heartbeat.clear_fetch();  // a heartbeat without a download publishes no STEP_FETCHING
  registry_->ApplyVerdict(lease, heartbeat, Verdict{});
  ASSERT_EQ(watcher.fetching.size(), 1u);
  const pb::JobEvent& event = watcher.fetching[0];
  EXPECT_EQ(event.checkpoint().step(), 7);
  EXPECT_EQ(event.job().id(), id);
  EXPECT_EQ(event.fetch().bytes_done(), 1000);
  EXPECT_EQ(event.fetch().bytes_total(), 4000);
  EXPECT_EQ(event.fetch().bytes_per_second(), 250.5);
  EXPECT_EQ(event.fetch().cache_bytes(), 9000);
  EXPECT_EQ(watcher.kinds, (std::vector<pb::JobEvent::Kind>{pb::JobEvent::KIND_STEP_STARTED,
                                                            pb::JobEvent::KIND_STEP_FETCHING}));
}

TEST_F(JobRegistryTest, ADownloadShowsInTheJobsSnapshotUntilItsForwardBegins) {
  const int64_t id = AddJob({7});
  const std::string lease_id = Grant();
  LeaseEntry* lease = registry_->LeaseOf(lease_id);
  ASSERT_NE(lease, nullptr);
  pb::HeartbeatRequest heartbeat;
  heartbeat.set_lease_id(lease_id);
  heartbeat.mutable_fetch()->set_bytes_done(1000);
  heartbeat.mutable_fetch()->set_bytes_total(4000);
  heartbeat.mutable_fetch()->set_bytes_per_second(-1);  // a worker's garbage counts as 0
  heartbeat.mutable_fetch()->set_cache_bytes(9000);
  registry_->ApplyVerdict(lease, heartbeat, Verdict{});
  pb::Job job;
  ToProto(registry_->Find(id)->record, &job);  // what GetJob, ListJobs and the dashboard get
  ASSERT_TRUE(job.checkpoints(0).has_fetch());
  EXPECT_EQ(job.checkpoints(0).fetch().bytes_done(), 1000);
  EXPECT_EQ(job.checkpoints(0).fetch().bytes_total(), 4000);
  EXPECT_EQ(job.checkpoints(0).fetch().bytes_per_second(), 0);
  EXPECT_EQ(job.checkpoints(0).fetch().cache_bytes(), 9000);
  EXPECT_TRUE(store_->GetJob(id)->checkpoints[0].fetch == std::nullopt);  // never stored
  heartbeat.clear_fetch();
  heartbeat.set_batches_total(4);  // the forward has begun
  registry_->ApplyVerdict(lease, heartbeat, Verdict{});
  ToProto(registry_->Find(id)->record, &job);
  EXPECT_FALSE(job.checkpoints(0).has_fetch());
}

TEST_F(JobRegistryTest, AnExpiredLeaseIsRetriedThenFailsAfterMaxAttempts) {
  const int64_t id = AddJob({1});
  Grant();
  EXPECT_TRUE(registry_->ExpireLeases(absl::Now() + absl::Seconds(1)));
  EXPECT_EQ(store_->GetJob(id)->checkpoints[0].state, StepState::kPending);
  Grant();
  EXPECT_FALSE(registry_->ExpireLeases(absl::Now() + absl::Seconds(1)));
  auto job = store_->GetJob(id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->checkpoints[0].attempt, 2);
  EXPECT_NE(job->checkpoints[0].error.find("attempt 2 of 2: giving up"), std::string::npos)
      << job->checkpoints[0].error;
}

TEST_F(JobRegistryTest, AGrantingLeaseIsNeitherExpiredNorFound) {
  AddJob({1});
  JobRegistry::Grant grant =
      registry_->Reserve(*registry_->FirstPending(storage::kAnyNamespace), {"w", false, "w", ""});
  EXPECT_FALSE(registry_->ExpireLeases(absl::InfiniteFuture()));
  EXPECT_EQ(registry_->FindLease(grant.lease_id, "w").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_->active_leases(), 1);
}

TEST_F(JobRegistryTest, AReleasedLeaseGivesItsAttemptBackAndAKindlessFailIsRefused) {
  const int64_t id = AddJob({1});
  const std::string lease = Grant();
  EXPECT_EQ(registry_->EndFailed(lease, pb::FailWorkRequest::KIND_UNSPECIFIED, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_NE(registry_->LeaseOf(lease), nullptr);
  auto pending = registry_->EndFailed(lease, pb::FailWorkRequest::KIND_RELEASED, "");
  ASSERT_OK(pending.status());
  EXPECT_TRUE(*pending);
  EXPECT_EQ(registry_->queued_steps(), 1);
  EXPECT_EQ(store_->GetJob(id)->checkpoints[0].attempt, 0);
}

// A remote step's spec as a listing gives it: its descriptor with one file of `path`.
storage::CheckpointSpec RemoteSpec(int64_t step, const std::string& path = "model.safetensors") {
  pb::RemoteCheckpoint remote;
  remote.set_kind(pb::SOURCE_KIND_HUB);
  remote.set_repo("o/m");
  remote.set_revision("step" + std::to_string(step));
  remote.add_files()->set_path(path);
  storage::CheckpointSpec spec;
  spec.step = step;
  spec.path = "hub:o/m@step" + std::to_string(step);
  spec.remote = remote.SerializeAsString();
  spec.revision = remote.revision();
  spec.commit = std::string(40, 'a');
  return spec;
}

// As RemoteSpec, skipped by the listing's dedupe as a duplicate of `of`.
storage::CheckpointSpec ListedDuplicate(int64_t step, int64_t of) {
  storage::CheckpointSpec spec = RemoteSpec(step);
  spec.state = StepState::kSkipped;
  spec.duplicate_of = of;
  spec.error = ListedDuplicateReason(of);
  return spec;
}

TEST_F(JobRegistryTest, AFollowedStepAddedAlreadyFinalAtUntilStepFinishesTheJob) {
  const int64_t id = AddSpecJob({RemoteSpec(1)}, /*follow_until=*/2);
  EXPECT_FALSE(registry_->EndLease(Grant(), StepState::kDone, ""));
  ASSERT_NE(registry_->Find(id), nullptr);  // still following: step 2 not listed yet
  const absl::StatusOr<bool> added = registry_->AddFollowed(id, {ListedDuplicate(2, 1)});
  ASSERT_OK(added.status());
  EXPECT_TRUE(*added);
  EXPECT_EQ(registry_->Find(id), nullptr);
  EXPECT_EQ(store_->GetJob(id)->state, JobState::kSucceeded);
}

TEST_F(JobRegistryTest, AFailedStepsListedDuplicatesGoBackToPending) {
  const int64_t id =
      AddSpecJob({RemoteSpec(1), ListedDuplicate(2, 1), ListedDuplicate(3, 1), RemoteSpec(4)});
  StoreCheckingWatcher watcher(store_.get());
  events_.Subscribe(id, &watcher);
  EXPECT_EQ(registry_->queued_steps(), 2);
  // True: steps went back to pending (the runner hands them to waiting workers).
  EXPECT_TRUE(registry_->EndLease(Grant(), StepState::kFailed, "bad weights"));
  ASSERT_NE(registry_->Find(id), nullptr);
  EXPECT_EQ(registry_->queued_steps(), 3);  // steps 2, 3 and 4
  auto job = store_->GetJob(id);
  ASSERT_OK(job.status());
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(job->checkpoints[i].state, StepState::kPending) << job->checkpoints[i].step;
    EXPECT_EQ(job->checkpoints[i].duplicate_of, -1);
    EXPECT_EQ(job->checkpoints[i].error, "");
  }
  EXPECT_EQ(watcher.kinds,
            (std::vector<pb::JobEvent::Kind>{
                pb::JobEvent::KIND_STEP_STARTED, pb::JobEvent::KIND_STEP_FINISHED,
                pb::JobEvent::KIND_STEP_ADDED, pb::JobEvent::KIND_STEP_ADDED}));
  // Now step 2 runs: it carries its own descriptor.
  const std::optional<StepKey> next = registry_->FirstPending(storage::kAnyNamespace);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(registry_->Checkpoint(*next).step, 2);
}

TEST_F(JobRegistryTest, ASucceededStepsListedDuplicatesStaySkipped) {
  const int64_t id = AddSpecJob({RemoteSpec(1), ListedDuplicate(2, 1)});
  EXPECT_FALSE(registry_->EndLease(Grant(), StepState::kDone, ""));
  EXPECT_EQ(registry_->Find(id), nullptr);
  EXPECT_EQ(store_->GetJob(id)->checkpoints[1].state, StepState::kSkipped);
}

TEST_F(JobRegistryTest, ADamagedStoredDescriptorFailsTheStepOnTheServer) {
  storage::CheckpointSpec damaged = RemoteSpec(5);
  damaged.remote = "\xff\xff\xff";  // not a RemoteCheckpoint
  const int64_t id = AddSpecJob({damaged, ListedDuplicate(6, 5)});
  const std::optional<StepKey> key = registry_->FirstPending(storage::kAnyNamespace);
  ASSERT_TRUE(key.has_value());
  EXPECT_TRUE(registry_->FailIfDamaged(*key));
  auto job = store_->GetJob(id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->checkpoints[0].state, StepState::kFailed);
  EXPECT_EQ(job->checkpoints[0].error, "stored remote descriptor of step 5 is damaged");
  EXPECT_EQ(job->checkpoints[1].state, StepState::kPending);  // its duplicate runs instead
  const std::optional<StepKey> next = registry_->FirstPending(storage::kAnyNamespace);
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(registry_->FailIfDamaged(*next));
  EXPECT_EQ(registry_->Checkpoint(*next).step, 6);
}

TEST_F(JobRegistryTest, TheNextRemoteStepIsReadAheadUnlessItWouldNearTheMessageBound) {
  AddSpecJob({RemoteSpec(1), RemoteSpec(2), RemoteSpec(3, std::string(40 << 20, 'x'))});
  JobRegistry::Grant first =
      registry_->Reserve(*registry_->FirstPending(storage::kAnyNamespace), {"w", false, "w", ""});
  EXPECT_EQ(first.response.unit().remote().revision(), "step1");
  EXPECT_EQ(first.response.unit().next_remote().revision(), "step2");
  JobRegistry::Grant second =
      registry_->Reserve(*registry_->FirstPending(storage::kAnyNamespace), {"w", false, "w", ""});
  EXPECT_EQ(second.response.unit().remote().revision(), "step2");
  EXPECT_FALSE(second.response.unit().has_next_remote());  // 40 MiB: past half of 64
}

}  // namespace
}  // namespace anisoscope::server
