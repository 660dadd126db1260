#include "common/file_gate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace anisoscope {
namespace {

namespace fs = std::filesystem;

class FileGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("file_gate_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "allowed" / "run");
    fs::create_directories(base_ / "outside");
    std::ofstream(base_ / "outside" / "secret.bin") << "secret";
    std::ofstream(base_ / "allowed" / "run" / "probe.jsonl") << "[1]";
  }
  void TearDown() override { fs::remove_all(base_); }

  FileGate Gate() {
    absl::StatusOr<FileGate> gate = FileGate::Beneath({(base_ / "allowed").string()});
    EXPECT_TRUE(gate.ok()) << gate.status();
    return *std::move(gate);
  }
  fs::path Allowed(const fs::path& rest) { return base_ / "allowed" / rest; }

  fs::path base_;
};

TEST_F(FileGateTest, ReadsAFileBeneathItsRoot) {
  absl::StatusOr<std::string> text = Gate().ReadFile(Allowed("run/probe.jsonl"), 100);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "[1]");
}

TEST_F(FileGateTest, MissingAndOutsideGetTheSameAnswerNamingOnlyThePathGiven) {
  const FileGate gate = Gate();
  const fs::path missing = Allowed("nope");
  const fs::path dot_dot = Allowed("../outside/secret.bin");
  fs::create_symlink(base_ / "outside", Allowed("link"));
  const fs::path through_link = Allowed("link/secret.bin");
  const fs::path elsewhere = base_ / "outside" / "secret.bin";
  for (const fs::path& path : {missing, dot_dot, through_link, elsewhere}) {
    const absl::Status status = gate.OpenFile(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << path;
    EXPECT_EQ(status.message(), "'" + path.string() +
                                    "' is not a file beneath an allowed root: it does not exist "
                                    "or is outside the server's --allow-root");
  }
}

TEST_F(FileGateTest, RefusesASiblingWithASharedPrefix) {
  fs::create_directories(base_ / "allowed-not");
  std::ofstream(base_ / "allowed-not" / "f") << "x";
  EXPECT_FALSE(Gate().IsFile(base_ / "allowed-not" / "f"));
}

TEST_F(FileGateTest, ADirectorySwappedForALinkAfterTheCheckIsRefusedAtOpen) {
  const FileGate gate = Gate();
  fs::create_directories(Allowed("step_1"));
  std::ofstream(Allowed("step_1/config.json")) << "{}";
  ASSERT_TRUE(gate.IsFile(Allowed("step_1/config.json")));  // checked at "submit"
  fs::remove_all(Allowed("step_1"));
  std::ofstream(base_ / "outside" / "config.json") << "{\"secret\": 1}";
  fs::create_directory_symlink(base_ / "outside", Allowed("step_1"));  // swapped in the queue
  EXPECT_EQ(gate.OpenFile(Allowed("step_1/config.json")).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(FileGateTest, FollowsRelativeLinksThatStayBeneathTheRoot) {
  fs::create_directories(Allowed("cache/blobs"));
  fs::create_directories(Allowed("cache/snapshots/abc"));
  std::ofstream(Allowed("cache/blobs/b1")) << "weights";
  fs::create_symlink("../../blobs/b1", Allowed("cache/snapshots/abc/model.safetensors"));
  EXPECT_TRUE(Gate().IsFile(Allowed("cache/snapshots/abc/model.safetensors")));
}

TEST_F(FileGateTest, RefusesAbsoluteAndMagicLinks) {
  fs::create_symlink(Allowed("run/probe.jsonl"), Allowed("absolute"));
  fs::create_symlink("/proc/self/root/etc/hostname", Allowed("magic"));
  EXPECT_FALSE(Gate().IsFile(Allowed("absolute")));
  EXPECT_FALSE(Gate().IsFile(Allowed("magic")));
}

TEST_F(FileGateTest, RefusesAFileOverTheBoundUnread) {
  std::ofstream(Allowed("big")) << std::string(2000, 'x');
  const absl::Status status = Gate().ReadFile(Allowed("big"), 1024).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message().find("xx"), std::string::npos);
}

TEST_F(FileGateTest, ListsThroughTheGate) {
  fs::create_directories(Allowed("run/step_1"));
  fs::create_symlink(base_ / "outside", Allowed("run/step_2"));
  absl::StatusOr<std::vector<GatedEntry>> entries = Gate().List(Allowed("run"));
  ASSERT_TRUE(entries.ok()) << entries.status();
  int seen = 0;
  for (const GatedEntry& entry : *entries) {
    if (entry.name == "step_1") {
      EXPECT_TRUE(entry.is_directory);
      ++seen;
    } else if (entry.name == "step_2") {
      EXPECT_TRUE(entry.is_link && !entry.is_directory && !entry.is_file);
      ++seen;
    } else if (entry.name == "probe.jsonl") {
      EXPECT_TRUE(entry.is_file);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 3);
}

TEST_F(FileGateTest, WithinKeepsReadsInsideTheFolder) {
  absl::StatusOr<FileGate> within = Gate().Within(Allowed("run"));
  ASSERT_TRUE(within.ok()) << within.status();
  EXPECT_TRUE(within->IsFile(Allowed("run/probe.jsonl")));
  fs::create_directories(Allowed("other"));
  std::ofstream(Allowed("other/f")) << "x";
  EXPECT_FALSE(within->IsFile(Allowed("run/../other/f")));
  EXPECT_FALSE(within->IsFile(Allowed("other/f")));
}

TEST_F(FileGateTest, IntersectKeepsTheDeeperOfNestedRoots) {
  const FileGate both = Gate().Intersect({Allowed("run").string(), (base_ / "outside").string()});
  EXPECT_EQ(both.roots(), std::vector<std::string>{Allowed("run").string()});
  EXPECT_TRUE(both.IsFile(Allowed("run/probe.jsonl")));
  const FileGate wider = Gate().Intersect({base_.string()});
  EXPECT_EQ(wider.roots(), std::vector<std::string>{(base_ / "allowed").string()});
  const FileGate none = Gate().Intersect({(base_ / "outside").string()});
  EXPECT_TRUE(none.roots().empty());
  EXPECT_FALSE(none.IsFile(Allowed("run/probe.jsonl")));
}

// A tenant who may write beneath the server's root replaces its namespace's root with a
// link to another team's folder: the narrower root is refused, not followed.
TEST_F(FileGateTest, ANarrowerRootRepointedByALinkIsLeftOut) {
  fs::create_directories(Allowed("teams/b"));
  std::ofstream(Allowed("teams/b/weights")) << "b";
  fs::create_directory_symlink(Allowed("teams/b"), Allowed("teams/a"));
  const FileGate a = Gate().Intersect({Allowed("teams/a").string()});
  EXPECT_TRUE(a.roots().empty());
  EXPECT_FALSE(a.IsFile(Allowed("teams/a/weights")));
  EXPECT_FALSE(a.IsFile(Allowed("teams/b/weights")));
}

TEST_F(FileGateTest, ARootSpelledWithATrailingSeparatorMatchesItsPaths) {
  absl::StatusOr<FileGate> gate = FileGate::Beneath({(base_ / "allowed").string() + "/"});
  ASSERT_TRUE(gate.ok()) << gate.status();
  EXPECT_TRUE(gate->IsFile(Allowed("run/probe.jsonl")));
  EXPECT_FALSE(gate->IsFile(Allowed("probe.jsonl")));  // not run/probe.jsonl by another name
}

TEST_F(FileGateTest, RelativePathsAreRefused) { EXPECT_FALSE(Gate().IsFile("run/probe.jsonl")); }

TEST_F(FileGateTest, AMissingRootFailsCreation) {
  EXPECT_EQ(FileGate::Beneath({(base_ / "missing").string()}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anisoscope
