#include "storage/job_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "storage/metrics_store.h"
#include "tests/storage/store_test_util.h"

namespace anisoscope::storage {
namespace {

using testing::RawCount;
using testing::RawExec;
using testing::TempDir;

JobSpec MakeSpec(const std::string& run) {
  JobSpec spec;
  spec.run = run;
  spec.probe_source = "text";
  spec.probe_path = "/data/probe.txt";
  spec.probe_mode = "lines";
  spec.samples = 64;
  spec.seq_len = 128;
  spec.force = true;
  spec.checkpoints = {{0, "/data/" + run + "/step0"}, {2000, "/data/" + run + "/step2000"}};
  return spec;
}

using JobsTest = testing::StoreTest;

TEST(JobSpecJsonTest, RoundTripsEveryField) {
  const JobSpec spec = MakeSpec("r");
  auto back = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_OK(back.status());
  EXPECT_EQ(back->run, "r");
  EXPECT_EQ(back->probe_source, "text");
  EXPECT_EQ(back->probe_path, "/data/probe.txt");
  EXPECT_EQ(back->probe_mode, "lines");
  EXPECT_EQ(back->samples, 64);
  EXPECT_EQ(back->seq_len, 128);
  EXPECT_TRUE(back->force);
  ASSERT_EQ(back->checkpoints.size(), 2u);
  EXPECT_EQ(back->checkpoints[1].step, 2000);
  EXPECT_EQ(back->checkpoints[1].path, "/data/r/step2000");
  EXPECT_EQ(JobSpecFromJson("{not json").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobSpecJsonTest, MetricGroupsRoundTripAndAnOlderSpecMeansAll) {
  JobSpec spec = MakeSpec("r");
  EXPECT_EQ(spec.metrics, "all");
  EXPECT_EQ(JobSpecToJson(spec).find("\"metrics\""), std::string::npos);
  auto back = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_OK(back.status());
  EXPECT_EQ(back->metrics, "all");
  spec.metrics = "core,spectra";
  back = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_OK(back.status());
  EXPECT_EQ(back->metrics, "core,spectra");
  // A spec stored before metric groups existed.
  back = JobSpecFromJson(R"({"run": "old", "probe_source": "tokens", "checkpoints": []})");
  ASSERT_OK(back.status());
  EXPECT_EQ(back->metrics, "all");
}

TEST_F(JobsTest, CreatedJobIsQueuedWithPendingCheckpoints) {
  auto id = store_->CreateJob(MakeSpec("r"), "");
  ASSERT_OK(id.status());
  auto job = store_->GetJob(*id);
  ASSERT_OK(job.status());
  EXPECT_EQ(job->id, *id);
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->error, "");
  EXPECT_EQ(job->spec.run, "r");
  EXPECT_EQ(job->spec.samples, 64);
  ASSERT_EQ(job->checkpoints.size(), 2u);
  EXPECT_EQ(job->checkpoints[0].step, 0);
  EXPECT_EQ(job->checkpoints[0].path, "/data/r/step0");
  EXPECT_EQ(job->checkpoints[0].state, StepState::kPending);
  EXPECT_EQ(job->checkpoints[0].size_bytes, 0);
  EXPECT_EQ(job->created_at.back(), 'Z');
  EXPECT_EQ(job->created_at, job->updated_at);
}

TEST_F(JobsTest, ProbeIsStoredWithTheJobAndAnOlderJobHasNone) {
  const std::string probe("\x0a\x00\xff" "bytes", 8);  // binary, with a NUL
  auto id = store_->CreateJob(MakeSpec("r"), probe);
  ASSERT_OK(id.status());
  auto stored = store_->JobProbe(*id);
  ASSERT_OK(stored.status());
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ(**stored, probe);
  EXPECT_EQ(store_->JobProbe(*id + 1).status().code(), absl::StatusCode::kNotFound);
  // None given: none stored.
  auto without = store_->CreateJob(MakeSpec("s"), "");
  ASSERT_OK(without.status());
  stored = store_->JobProbe(*without);
  ASSERT_OK(stored.status());
  EXPECT_FALSE(stored->has_value());
  // A job stored before schema 8 has no row in job_probes.
  RawExec(path_, "DELETE FROM job_probes");
  stored = store_->JobProbe(*id);
  ASSERT_OK(stored.status());
  EXPECT_FALSE(stored->has_value());
}

TEST_F(JobsTest, UnknownJobIsNotFound) {
  auto job = store_->GetJob(42);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), "job 42 not found");
  EXPECT_EQ(store_->SetJobState(42, JobState::kRunning, "").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateCheckpoint(42, {0}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobsTest, StepListedTwiceIsRejectedAndNothingIsStored) {
  JobSpec spec = MakeSpec("r");
  spec.checkpoints.push_back(spec.checkpoints[0]);
  EXPECT_EQ(store_->CreateJob(spec, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM jobs"), 0);
  EXPECT_EQ(RawCount(path_, "SELECT COUNT(*) FROM checkpoints"), 0);
}

TEST_F(JobsTest, LifecycleUpdatesStatesAndBumpsUpdatedAt) {
  auto id = store_->CreateJob(MakeSpec("r"), "");
  ASSERT_OK(id.status());
  const std::string created = store_->GetJob(*id)->updated_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));

  ASSERT_OK(store_->SetJobState(*id, JobState::kRunning, "").status());
  JobCheckpoint done{2000, "ignored/path", 123456, StepState::kDone, "", "p1", 3.5};
  ASSERT_OK(store_->UpdateCheckpoint(*id, done).status());
  const absl::StatusOr<std::string> updated_at =
      store_->UpdateCheckpoint(*id, {0, "", 99, StepState::kFailed, "truncated", "", 0.25});
  ASSERT_OK(updated_at.status());
  auto running = store_->GetJob(*id);
  ASSERT_OK(running.status());
  EXPECT_EQ(running->state, JobState::kRunning);
  EXPECT_GT(running->updated_at, created);
  EXPECT_EQ(running->updated_at, *updated_at);  // the time a change returns is the one stored
  const JobCheckpoint& failed = running->checkpoints[0];
  EXPECT_EQ(failed.state, StepState::kFailed);
  EXPECT_EQ(failed.error, "truncated");
  EXPECT_EQ(failed.size_bytes, 99);
  EXPECT_EQ(failed.path, "/data/r/step0");  // the path never changes
  const JobCheckpoint& stored = running->checkpoints[1];
  EXPECT_EQ(stored.state, StepState::kDone);
  EXPECT_EQ(stored.probe_id, "p1");
  EXPECT_EQ(stored.seconds, 3.5);
  EXPECT_EQ(stored.size_bytes, 123456);
  EXPECT_EQ(stored.path, "/data/r/step2000");

  const absl::Status missing_step = store_->UpdateCheckpoint(*id, {1}).status();
  EXPECT_EQ(missing_step.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing_step.message().find("step 1"), absl::string_view::npos) << missing_step;

  const absl::StatusOr<std::string> failed_at =
      store_->SetJobState(*id, JobState::kFailed, "1 of 2 steps failed");
  ASSERT_OK(failed_at.status());
  auto finished = store_->GetJob(*id);
  ASSERT_OK(finished.status());
  EXPECT_EQ(finished->updated_at, *failed_at);
  EXPECT_EQ(finished->state, JobState::kFailed);
  EXPECT_EQ(finished->error, "1 of 2 steps failed");
}

TEST_F(JobsTest, ListJobsIsMostRecentFirstAndUnfinishedOldestFirst) {
  std::vector<int64_t> ids;
  for (const char* run : {"a", "b", "c", "d"}) {
    auto id = store_->CreateJob(MakeSpec(run), "");
    ASSERT_OK(id.status());
    ids.push_back(*id);
  }
  ASSERT_OK(store_->SetJobState(ids[0], JobState::kRunning, "").status());
  ASSERT_OK(store_->SetJobState(ids[1], JobState::kSucceeded, "").status());
  ASSERT_OK(store_->SetJobState(ids[2], JobState::kCancelled, "").status());

  auto recent = store_->ListJobs(3, "default", "");
  ASSERT_OK(recent.status());
  ASSERT_EQ(recent->size(), 3u);
  EXPECT_EQ((*recent)[0].id, ids[3]);
  EXPECT_EQ((*recent)[0].spec.run, "d");
  EXPECT_EQ((*recent)[2].id, ids[1]);
  EXPECT_EQ((*recent)[2].state, JobState::kSucceeded);
  EXPECT_EQ((*recent)[2].checkpoints.size(), 2u);
  EXPECT_EQ(store_->ListJobs(0, "default", "")->size(), 4u);

  auto unfinished = store_->UnfinishedJobs();
  ASSERT_OK(unfinished.status());
  EXPECT_EQ(*unfinished, (std::vector<int64_t>{ids[0], ids[3]}));
}

TEST_F(JobsTest, ListJobsFiltersByRunInTheQuery) {
  std::vector<int64_t> ids;
  for (const char* run : {"a", "b", "a", "a"}) {
    auto id = store_->CreateJob(MakeSpec(run), "");
    ASSERT_OK(id.status());
    ids.push_back(*id);
  }
  auto of_a = store_->ListJobs(2, "default", "a");
  ASSERT_OK(of_a.status());
  ASSERT_EQ(of_a->size(), 2u);  // the limit counts only run a's jobs
  EXPECT_EQ((*of_a)[0].id, ids[3]);
  EXPECT_EQ((*of_a)[1].id, ids[2]);
  EXPECT_EQ(store_->ListJobs(0, "default", "a")->size(), 3u);
  EXPECT_EQ(store_->ListJobs(0, "default", "b")->size(), 1u);
  EXPECT_TRUE(store_->ListJobs(0, "default", "zzz")->empty());
}

TEST_F(JobsTest, JobsSurviveAReopen) {
  auto id = store_->CreateJob(MakeSpec("r"), "");
  ASSERT_OK(id.status());
  store_.reset();
  auto reopened = MetricsStore::Open({path_});
  ASSERT_OK(reopened.status());
  EXPECT_EQ(*(*reopened)->UnfinishedJobs(), std::vector<int64_t>{*id});
  EXPECT_EQ((*reopened)->GetJob(*id)->spec.checkpoints.size(), 2u);
}

TEST(StateNamesTest, NamesRoundTrip) {
  for (JobState state : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                         JobState::kFailed, JobState::kCancelled}) {
    EXPECT_EQ(ParseJobState(JobStateName(state)), state);
  }
  for (StepState state : {StepState::kPending, StepState::kRunning, StepState::kDone,
                          StepState::kSkipped, StepState::kFailed, StepState::kCancelled}) {
    EXPECT_EQ(ParseStepState(StepStateName(state)), state);
  }
  EXPECT_STREQ(JobStateName(JobState::kSucceeded), "succeeded");
  EXPECT_STREQ(StepStateName(StepState::kDone), "done");
  EXPECT_EQ(ParseJobState("bogus"), std::nullopt);
}

}  // namespace
}  // namespace anisoscope::storage
