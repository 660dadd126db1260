#include "common/path_policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace anisoscope {
namespace {

namespace fs = std::filesystem;

class PathPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("path_policy_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "allowed" / "run");
    fs::create_directories(base_ / "outside");
    std::ofstream(base_ / "outside" / "secret.bin") << "x";
    std::ofstream(base_ / "allowed" / "run" / "probe.jsonl") << "[1]";
  }
  void TearDown() override { fs::remove_all(base_); }

  std::unique_ptr<PathPolicy> Policy() {
    auto policy = PathPolicy::Create({{(base_ / "allowed").string()}});
    EXPECT_TRUE(policy.ok()) << policy.status();
    return std::move(policy).value();
  }

  fs::path base_;
};

TEST_F(PathPolicyTest, AcceptsPathInsideRoot) {
  auto resolved = Policy()->Resolve((base_ / "allowed" / "run" / "probe.jsonl").string(), "probe");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(*resolved, fs::canonical(base_ / "allowed" / "run" / "probe.jsonl"));
}

TEST_F(PathPolicyTest, RefusesDotDotEscape) {
  auto resolved =
      Policy()->Resolve((base_ / "allowed" / ".." / "outside" / "secret.bin").string(), "probe");
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(PathPolicyTest, RefusesSymlinkPointingOutside) {
  fs::create_symlink(base_ / "outside", base_ / "allowed" / "link");
  auto resolved = Policy()->Resolve((base_ / "allowed" / "link" / "secret.bin").string(), "probe");
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(resolved.status().message().find("outside every --allow-root"), std::string::npos);
}

TEST_F(PathPolicyTest, RefusesSiblingWithSharedPrefix) {
  fs::create_directories(base_ / "allowed-not");
  auto resolved = Policy()->Resolve((base_ / "allowed-not").string(), "checkpoint");
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(PathPolicyTest, MissingPathIsNotFound) {
  auto resolved = Policy()->Resolve((base_ / "allowed" / "nope").string(), "checkpoint");
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PathPolicyTest, RelativePathIsInvalid) {
  auto resolved = Policy()->Resolve("relative/path", "checkpoint");
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PathPolicyTest, MissingRootFailsCreate) {
  auto policy = PathPolicy::Create({{(base_ / "missing").string()}});
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope
