#include "sources/fetch/fetch_plan.h"

#include <gtest/gtest.h>

namespace anisoscope::fetch {
namespace {

listing::RemoteFile File(std::string path, uint64_t size, std::string sha256, std::string etag) {
  listing::RemoteFile file;
  file.path = std::move(path);
  file.size = size;
  file.sha256 = std::move(sha256);
  file.etag = std::move(etag);
  file.url = "http://127.0.0.1:1/" + file.path;
  return file;
}

TEST(FetchPlanTest, AHubStepIsItsCommitRecordedUnderItsBranch) {
  listing::RemoteStep step;
  step.step = 1000;
  step.name = step.revision = "step1000";
  step.repo = "EleutherAI/pythia-160m";
  step.commit = std::string(40, 'a');
  const std::string sha256(64, 'b');
  step.files = {File("config.json", 10, "", "\"" + std::string(40, 'c') + "\""),
                File("model.safetensors", 2000, sha256, sha256)};
  const absl::StatusOr<FetchStep> plan = PlanFetch(step);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->cache_step.repo.folder, "models--EleutherAI--pythia-160m");
  EXPECT_EQ(plan->cache_step.snapshot, step.commit);
  EXPECT_EQ(plan->cache_step.revision, "step1000");
  ASSERT_EQ(plan->cache_step.files.size(), 2u);
  ASSERT_EQ(plan->files.size(), 2u);
  EXPECT_EQ(plan->cache_step.files[0].etag, std::string(40, 'c'));  // quotes dropped
  EXPECT_EQ(plan->cache_step.files[1].size, 2000u);
  EXPECT_EQ(plan->files[1].expected_sha256, sha256);
  EXPECT_EQ(plan->files[1].url, "http://127.0.0.1:1/model.safetensors");
}

TEST(FetchPlanTest, AnS3StepIsItsFolderWithNoRevision) {
  listing::RemoteStep step;
  step.step = 100;
  step.name = "step100";
  step.repo = "ckpt";
  step.revision = "runs/a/step100/";
  step.files = {File("model.safetensors", 5, "", "0123456789abcdef0123456789abcdef")};
  const absl::StatusOr<FetchStep> plan = PlanFetch(step);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->cache_step.repo.folder, "s3--ckpt");
  EXPECT_EQ(plan->cache_step.snapshot, cache::S3SnapshotName("runs/a/step100/"));
  EXPECT_TRUE(plan->cache_step.revision.empty());
}

TEST(FetchPlanTest, ARepoTheCacheRefusesOrNoFilesIsAnError) {
  listing::RemoteStep step;
  step.name = "step1";
  step.repo = "../evil";
  step.commit = std::string(40, 'a');
  step.files = {File("model.safetensors", 5, "", std::string(40, 'c'))};
  EXPECT_EQ(PlanFetch(step).status().code(), absl::StatusCode::kInvalidArgument);
  step.repo = "org/name";
  step.files.clear();
  const absl::Status none = PlanFetch(step).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("step1"), std::string::npos) << none;
}

}  // namespace
}  // namespace anisoscope::fetch
