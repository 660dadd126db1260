// AskStore and StoreCompletion (server/jobs/step_completion.h) against a real SQLite store:
// a heartbeat's verdicts, and a completion checked, stored with its lease's end and observed.
#include "server/jobs/step_completion.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/jobs/step_upload.h"
#include "storage/metrics_store.h"
#include "tests/server/fake_extractor.h"
#include "tests/storage/store_test_util.h"
#include "worker/metrics_upload.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

constexpr char kFingerprint[] = "xxh3-128:0123456789abcdef0123456789abcdef";
constexpr char kLeaseId[] = "lease-5";

// One observer's call, as it saw it.
struct ObservedCall {
  std::string observer;
  int64_t job_id = 0;
  std::string run;
  int64_t step = 0;
  std::string model_family;
  std::string device;
  double seconds = 0;
  const JobNotices* notices = nullptr;
};

class RecordingObserver final : public StepObserver {
 public:
  RecordingObserver(std::string name, std::vector<ObservedCall>* calls)
      : name_(std::move(name)), calls_(calls) {}
  void StepStored(const StoredStep& step, JobNotices& notices) override {
    calls_->push_back({name_, step.job_id, step.result->run, step.result->step, step.model_family,
                       step.device, step.seconds, &notices});
  }

 private:
  const std::string name_;
  std::vector<ObservedCall>* const calls_;
};

class FakeNotices final : public JobNotices {
 public:
  void PublishAlarm(int64_t job_id, const pb::Alarm& /*alarm*/) override {
    published.push_back(job_id);
  }
  std::vector<int64_t> published;
};

// A valid upload of step 5 (the fake engine's metrics: bert, 2 layers, 2 heads, 3 samples).
pb::CompleteWorkRequest ValidUpload() {
  pb::CompleteWorkRequest upload;
  const analysis::CheckpointMetrics metrics = testing::FakeMetricsFor("/x/step_5");
  upload.set_lease_id(kLeaseId);
  upload.mutable_probe()->set_id("p0123456789abcdef0123456789abcdef");
  upload.mutable_probe()->set_description("text probe.txt");
  upload.mutable_probe()->set_num_samples(metrics.num_samples);
  upload.mutable_probe()->set_num_tokens(metrics.num_tokens);
  *upload.mutable_metrics() = worker::ToUpload(metrics);
  upload.set_checkpoint_bytes(1234);
  upload.set_seconds(0.5);
  return upload;
}

class StepCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::MetricsStore::Open({dir_.File("metrics.db")});
    ASSERT_OK(store.status());
    store_ = std::move(store).value();
    storage::JobSpec spec;
    spec.run = "run";
    spec.probe_source = "text";
    spec.probe_path = "/x/probe.txt";
    spec.probe_mode = "lines";
    spec.checkpoints = {{5, "/x/step_5"}, {6, "/x/step_6"}};
    auto job = store_->CreateJob(spec, "");
    ASSERT_OK(job.status());
    job_id_ = *job;
    // Step 5 leased, as the runner stores a grant.
    storage::JobCheckpoint leased;
    leased.step = 5;
    leased.path = "/x/step_5";
    leased.state = storage::StepState::kRunning;
    leased.attempt = 1;
    leased.lease_id = kLeaseId;
    leased.lease_holder = "worker-identity";
    ASSERT_OK(store_->UpdateCheckpoint(job_id_, leased).status());

    auto probe = std::make_shared<pb::UnitProbe>();
    probe->mutable_text()->set_path("/x/probe.txt");
    probe->set_samples(128);
    probe->set_token_samples(128);
    completion_.job_id = job_id_;
    completion_.lease_id = kLeaseId;
    completion_.ns = storage::kDefaultNamespace;
    completion_.run = "run";
    completion_.device = "cuda:0";
    completion_.probe = std::move(probe);
    completion_.checkpoint = leased;
  }

  absl::StatusOr<storage::FinishedLease> Complete(const pb::CompleteWorkRequest& upload) {
    return StoreCompletion(upload, completion_, *store_, {&first_, &second_}, notices_);
  }

  storage::JobCheckpoint StoredCheckpoint() {
    auto job = store_->GetJob(job_id_);
    EXPECT_OK(job.status());
    return job.ok() ? job->checkpoints[0] : storage::JobCheckpoint{};
  }

  bool StepStored() {
    auto stored = store_->HasStep(storage::kDefaultNamespace, "run",
                                  "p0123456789abcdef0123456789abcdef", 5);
    EXPECT_OK(stored.status());
    return stored.ok() && *stored;
  }

  TestTempDir dir_;
  std::unique_ptr<storage::MetricsStore> store_;
  int64_t job_id_ = 0;
  Completion completion_;
  std::vector<ObservedCall> calls_;
  RecordingObserver first_{"first", &calls_};
  RecordingObserver second_{"second", &calls_};
  FakeNotices notices_;
};

TEST_F(StepCompletionTest, NoQuestionContinues) {
  auto verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 5, "", ""});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kContinue);
  // Questions whose answer is no continue too.
  verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 5, "p1", kFingerprint});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kContinue);
}

TEST_F(StepCompletionTest, StoredStepIsAlreadyStored) {
  ASSERT_OK(store_->WriteStep(storage::testing::MakeStep("run", "p1", 5), false));
  auto verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 5, "p1", ""});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kAlreadyStored);
  // Another step, or another probe, of the run is not.
  verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 6, "p1", ""});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kContinue);
  verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 5, "p2", ""});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kContinue);
}

TEST_F(StepCompletionTest, EarlierStepWithTheSameFingerprintIsADuplicate) {
  storage::StepResult earlier = storage::testing::MakeStep("run", "p1", 3);
  earlier.fingerprint = kFingerprint;
  ASSERT_OK(store_->WriteStep(earlier, false));
  auto verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 5, "", kFingerprint});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kDuplicate);
  EXPECT_EQ(verdict->duplicate_of, 3);
  // Only an earlier step counts.
  verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 2, "", kFingerprint});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kContinue);
  // The stored question is asked first.
  verdict = AskStore(*store_, {storage::kDefaultNamespace, "run", 3, "p1", kFingerprint});
  ASSERT_OK(verdict.status());
  EXPECT_EQ(verdict->kind, Verdict::Kind::kAlreadyStored);
}

TEST_F(StepCompletionTest, InvalidUploadIsRefusedStoringNothingAndTellingNoObserver) {
  pb::CompleteWorkRequest lying_shape = ValidUpload();
  lying_shape.mutable_metrics()->set_num_heads(3);
  EXPECT_EQ(Complete(lying_shape).status().code(), absl::StatusCode::kInvalidArgument);
  // Well formed, but not the probe the lease's heartbeat reported.
  completion_.checkpoint.probe_id = "p00000000000000000000000000000001";
  EXPECT_EQ(Complete(ValidUpload()).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_FALSE(StepStored());
  const storage::JobCheckpoint checkpoint = StoredCheckpoint();
  EXPECT_EQ(checkpoint.state, storage::StepState::kRunning);
  EXPECT_EQ(checkpoint.lease_id, kLeaseId);
  EXPECT_TRUE(calls_.empty());
}

TEST_F(StepCompletionTest, ValidUploadIsStoredAndEachObserverIsToldOnceInOrder) {
  auto finished = Complete(ValidUpload());
  ASSERT_OK(finished.status());
  EXPECT_EQ(finished->checkpoint.state, storage::StepState::kDone);
  EXPECT_EQ(finished->checkpoint.probe_id, "p0123456789abcdef0123456789abcdef");
  EXPECT_EQ(finished->checkpoint.size_bytes, 1234);
  EXPECT_EQ(finished->checkpoint.seconds, 0.5);
  EXPECT_EQ(finished->checkpoint.lease_id, "");
  EXPECT_FALSE(finished->updated_at.empty());

  EXPECT_TRUE(StepStored());
  const storage::JobCheckpoint checkpoint = StoredCheckpoint();
  EXPECT_EQ(checkpoint.state, storage::StepState::kDone);
  EXPECT_EQ(checkpoint.lease_id, "");
  EXPECT_EQ(checkpoint.lease_holder, "");

  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[0].observer, "first");
  EXPECT_EQ(calls_[1].observer, "second");
  for (const ObservedCall& call : calls_) {
    EXPECT_EQ(call.job_id, job_id_);
    EXPECT_EQ(call.run, "run");
    EXPECT_EQ(call.step, 5);
    EXPECT_EQ(call.model_family, "bert");
    EXPECT_EQ(call.device, "cuda:0");
    EXPECT_EQ(call.seconds, 0.5);
    EXPECT_EQ(call.notices, &notices_);
  }
  EXPECT_TRUE(notices_.published.empty());
}

TEST_F(StepCompletionTest, StepStoredMeanwhileIsSkippedAndNotObserved) {
  auto meanwhile = StepResultFromUpload(ValidUpload(), "run", 5, "/x/step_5");
  ASSERT_OK(meanwhile.status());
  ASSERT_OK(store_->WriteStep(*meanwhile, false));

  auto finished = Complete(ValidUpload());
  ASSERT_OK(finished.status());
  EXPECT_EQ(finished->checkpoint.state, storage::StepState::kSkipped);
  EXPECT_EQ(StoredCheckpoint().state, storage::StepState::kSkipped);
  EXPECT_EQ(StoredCheckpoint().lease_id, "");
  EXPECT_TRUE(calls_.empty());
}

TEST_F(StepCompletionTest, WithReplaceAStoredStepIsStoredAgainAndObserved) {
  auto meanwhile = StepResultFromUpload(ValidUpload(), "run", 5, "/x/step_5");
  ASSERT_OK(meanwhile.status());
  ASSERT_OK(store_->WriteStep(*meanwhile, false));
  completion_.mode.replace = true;

  auto finished = Complete(ValidUpload());
  ASSERT_OK(finished.status());
  EXPECT_EQ(finished->checkpoint.state, storage::StepState::kDone);
  EXPECT_EQ(calls_.size(), 2u);
}

TEST_F(StepCompletionTest, LeaseNoLongerCurrentIsFailedPreconditionAndNotObserved) {
  completion_.lease_id = "lease-old";
  EXPECT_EQ(Complete(ValidUpload()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(StepStored());
  EXPECT_EQ(StoredCheckpoint().lease_id, kLeaseId);
  EXPECT_TRUE(calls_.empty());
}

}  // namespace
}  // namespace anisoscope::server
