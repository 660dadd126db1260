// Step names and the discovery of step directories.
#include "analysis/checkpoint/step_discovery.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/analysis/checkpoint/checkpoint_test_util.h"

namespace anisoscope::analysis {
namespace {

namespace fs = std::filesystem;

TEST(StepDiscoveryTest, ParseStepTable) {
  const std::pair<const char*, std::optional<int64_t>> kCases[] = {
      {"multiberts-seed_0-step_20k", 20000},
      {"multiberts-seed_4-step_2000k", 2000000},
      {"step_1M", 1000000},
      {"step_600", 600},
      {"step40", 40},
      {"step143000", 143000},
      {"step0", 0},
      {"checkpoint-200", 200},
      {"checkpoint-400000", 400000},
      {"stage1-step1000-tokens4B", 1000},
      {"stage2-ingredient1-step1000-tokens5B", 1000},
      {"step1000-tokens4B", 1000},
      {"ckpt_000", 0},
      {"ckpt_359", 359},
      {"seed_3-step_7", 7},
      {"1200", 1200},
      {"global_step500", 500},
      {"seed_0", std::nullopt},
      {"multiberts-seed_0", std::nullopt},
      {"tokens4B", std::nullopt},
      {"steps", std::nullopt},
      {"step_20x", std::nullopt},
      {"laststep5", std::nullopt},
      {"v2", std::nullopt},
      {"", std::nullopt},
      {"step_99999999999999999999", std::nullopt},
  };
  for (const auto& [name, want] : kCases) {
    EXPECT_EQ(ParseStep(name), want) << name;
  }
}

class DiscoverStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path Dir(const std::string& name) {
    fs::create_directories(root_ / name);
    return root_ / name;
  }

  fs::path root_;
};

TEST_F(DiscoverStepsTest, SortsByStepIgnoringOtherEntriesAndFollowingSymlinks) {
  Dir("multiberts-seed_0-step_20k");
  Dir("multiberts-seed_0-step_0");
  Dir("multiberts-seed_0-step_2k");
  Dir("notes");
  std::ofstream(root_ / "step_5");  // a file, not a directory
  const fs::path elsewhere = Dir("elsewhere/target");
  fs::create_directory_symlink(elsewhere, root_ / "step_1M");
  absl::StatusOr<std::vector<DiscoveredStep>> steps = DiscoverSteps(root_, FileGate::Host());
  ASSERT_TRUE(steps.ok()) << steps.status();
  std::vector<int64_t> got;
  for (const DiscoveredStep& step : *steps) got.push_back(step.step);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 2000, 20000, 1000000}));
  EXPECT_EQ((*steps)[1].path, root_ / "multiberts-seed_0-step_2k");
  EXPECT_EQ((*steps)[3].path, root_ / "step_1M");
}

TEST_F(DiscoverStepsTest, TwoDirectoriesWithOneStepNameBoth) {
  Dir("step_1k");
  Dir("checkpoint-1000");
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_, FileGate::Host()).status(),
                       absl::StatusCode::kInvalidArgument, (root_ / "step_1k").string(),
                       (root_ / "checkpoint-1000").string(), "step 1000"));
}

TEST_F(DiscoverStepsTest, NoStepDirectoriesSaysWhatItFoundAndHowToNameThem) {
  Dir("notes");
  Dir("bin");
  std::ofstream(root_ / "README");
  const absl::Status status = DiscoverSteps(root_, FileGate::Host()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            root_.string() +
                ": no subdirectory names a training step (found: README, bin/, notes/); name "
                "them like step1000, checkpoint-1000 or 1000, or give each checkpoint with "
                "--checkpoint STEP=PATH");
  fs::remove_all(root_);
  fs::create_directories(root_);
  EXPECT_EQ(DiscoverSteps(root_, FileGate::Host()).status().message(),
            root_.string() +
                ": no subdirectory names a training step (it is empty); name them like "
                "step1000, checkpoint-1000 or 1000, or give each checkpoint with --checkpoint "
                "STEP=PATH");
}

TEST_F(DiscoverStepsTest, NotADirectoryNamesIt) {
  std::ofstream(root_ / "file");
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_ / "file", FileGate::Host()).status(),
                       absl::StatusCode::kInvalidArgument, (root_ / "file").string(),
                       "Not a directory"));
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_ / "missing", FileGate::Host()).status(),
                       absl::StatusCode::kNotFound, (root_ / "missing").string()));
}

// A Hugging Face cache repository as huggingface_hub lays it out: refs/REVISION holds a
// commit, snapshots/COMMIT/ holds symlinks into blobs/.
class HfCacheTest : public DiscoverStepsTest {
 protected:
  fs::path Snapshot(const std::string& revision, const std::string& commit) {
    fs::create_directories((root_ / "refs" / revision).parent_path());
    std::ofstream(root_ / "refs" / revision) << commit;  // no newline, as the hub writes it
    const fs::path snapshot = Dir("snapshots/" + commit);
    fs::create_directories(root_ / "blobs");
    std::ofstream(root_ / "blobs" / ("blob" + commit)) << "{}";
    fs::create_symlink(fs::path("../../blobs") / ("blob" + commit), snapshot / "config.json");
    return snapshot;
  }
};

TEST_F(HfCacheTest, RevisionNamesCarryTheStepsAndRefsNameTheSnapshots) {
  Snapshot("main", "c0ffee");
  const fs::path first = Snapshot("stage1-step1000-tokens5B", "a1b2c3");
  const fs::path second = Snapshot("stage1-step2000-tokens9B", "d4e5f6");
  Snapshot("pr/1", "0123ab");
  std::ofstream(root_ / "refs" / "step3000") << "fedcba";  // its snapshot is not there yet
  Dir("step_5");  // not a snapshot: a cache repository is read through its refs only
  ASSERT_TRUE(IsHfCacheRepository(root_, FileGate::Host()));
  absl::StatusOr<std::vector<DiscoveredStep>> steps = DiscoverSteps(root_, FileGate::Host());
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ((*steps)[0].step, 1000);
  EXPECT_EQ((*steps)[0].path, first);
  EXPECT_EQ((*steps)[1].step, 2000);
  EXPECT_EQ((*steps)[1].path, second);
}

TEST_F(HfCacheTest, ARefThatIsNotACommitIsNamedButNotQuoted) {
  Snapshot("step100", "abc123");
  std::ofstream(root_ / "refs" / "step200") << "../../etc";
  const absl::Status status = DiscoverSteps(root_, FileGate::Host()).status();
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, root_.string(), "'step200'",
                       "commit hash"));
  EXPECT_EQ(status.message().find("etc"), std::string::npos) << status;
}

// A ref linked to a file outside the cache folder (a token file, /etc/shadow) is never
// opened, and its content never comes back; nor is a ref over 1 KiB read.
TEST_F(HfCacheTest, ARefLinkedOutOfTheCacheOrTooLargeIsRefusedUnread) {
  Snapshot("step100", "abc123");
  const fs::path secret = root_.parent_path() / (root_.filename().string() + "_secret");
  std::ofstream(secret) << "deadbeefcafe";  // a hex word: a ref would accept it as a commit
  fs::create_directories(root_ / "snapshots" / "deadbeefcafe");
  fs::create_symlink(secret, root_ / "refs" / "step300");
  absl::Status status = DiscoverSteps(root_, FileGate::Host()).status();
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, "'step300'")) << status;
  EXPECT_EQ(status.message().find("deadbeef"), std::string::npos) << status;
  fs::remove(root_ / "refs" / "step300");
  std::ofstream(root_ / "refs" / "step400") << std::string(2000, 'a');
  status = DiscoverSteps(root_, FileGate::Host()).status();
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kInvalidArgument, "'step400'", "1024 bytes"));
  fs::remove(secret);
}

TEST_F(HfCacheTest, TwoRevisionsNamingOneStepAreRefused) {
  Snapshot("step1000", "abc123");
  Snapshot("stage1-step1000-tokens4B", "def456");
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_, FileGate::Host()).status(),
                       absl::StatusCode::kInvalidArgument, "both name step 1000"));
}

}  // namespace
}  // namespace anisoscope::analysis
