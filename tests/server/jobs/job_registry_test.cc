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
    if (event.kind() == pb::JobEvent::KIND_JOB_FINISHED) {
      stored_state_at_finish = store_->GetJob(event.job().id())->state;
    }
  }
  void OnClosed(const absl::Status&) override {}

  std::vector<pb::JobEvent::Kind> kinds;
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

}  // namespace
}  // namespace anisoscope::server
