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
  absl::StatusOr<std::vector<DiscoveredStep>> steps = DiscoverSteps(root_);
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
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_).status(), absl::StatusCode::kInvalidArgument,
                       (root_ / "step_1k").string(), (root_ / "checkpoint-1000").string(),
                       "step 1000"));
}

TEST_F(DiscoverStepsTest, NoStepDirectoriesNamesTheDirectory) {
  Dir("notes");
  EXPECT_TRUE(
      StatusIs(DiscoverSteps(root_).status(), absl::StatusCode::kInvalidArgument, root_.string()));
}

TEST_F(DiscoverStepsTest, NotADirectoryNamesIt) {
  std::ofstream(root_ / "file");
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_ / "file").status(), absl::StatusCode::kInvalidArgument,
                       (root_ / "file").string(), "not a directory"));
  EXPECT_TRUE(StatusIs(DiscoverSteps(root_ / "missing").status(),
                       absl::StatusCode::kInvalidArgument, (root_ / "missing").string()));
}

}  // namespace
}  // namespace anisoscope::analysis
