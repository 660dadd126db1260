// The names the cache puts on disk: upstream's folder naming, and every hostile spelling
// refused with an error that names the repo, the step and the name.
#include "sources/cache/cache_names.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"

namespace anisoscope::cache {
namespace {

TEST(CacheNames, RepoFoldersFollowRepoFolderName) {
  EXPECT_EQ(HubModelRepo("EleutherAI/pythia-160m")->folder, "models--EleutherAI--pythia-160m");
  EXPECT_EQ(HubModelRepo("gpt2")->folder, "models--gpt2");
  EXPECT_EQ(HubModelRepo("google/multiberts-seed_0-step_20k")->display,
            "hub:google/multiberts-seed_0-step_20k");
  EXPECT_EQ(S3BucketRepo("my.bucket-1")->folder, "s3--my.bucket-1");
  for (const char* bad :
       {"", "a/b/c", "../x", "a/..", "a--b/c", "/abs", "a/", "a b/c", "org/na\\me", "-org/x"}) {
    EXPECT_FALSE(HubModelRepo(bad).ok()) << bad;
  }
  for (const char* bad : {"ab", "Upper", "a/b", "..x", "-bucket", "bu..cket"}) {
    EXPECT_FALSE(S3BucketRepo(bad).ok()) << bad;
  }
}

TEST(CacheNames, FileSegmentsRefuseEveryEscape) {
  EXPECT_EQ(FileSegments("a/b/c.bin", "w").value(), (std::vector<std::string>{"a", "b", "c.bin"}));
  const std::string nul("a\0b", 3);
  for (const std::string& bad :
       {std::string(""), std::string("../x"), std::string("/etc/passwd"), std::string("a//b"),
        std::string("./a"), std::string("a/."), std::string("a/../../b"), std::string("a\\b"),
        std::string("..\\..\\x"), nul, std::string("a/"), std::string("x\n"), std::string(256, 'a'),
        std::string("blob.incomplete")}) {
    const absl::Status status = FileSegments(bad, "hub:org/m at c0ffee").status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad;
    EXPECT_TRUE(absl::StartsWith(status.message(), "hub:org/m at c0ffee: file name '"))
        << status.message();
  }
}

TEST(CacheNames, SnapshotsEtagsAndRevisions) {
  EXPECT_TRUE(IsCommitHash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("main"));
  EXPECT_EQ(S3SnapshotName("runs/a/step100/"), "runs%2Fa%2Fstep100");
  EXPECT_EQ(S3SnapshotName(".hidden/x y"), "%2Ehidden%2Fx%20y");
  EXPECT_NE(S3SnapshotName("a/b"), S3SnapshotName("a%2Fb"));  // '%' is encoded too
  EXPECT_TRUE(CheckSnapshotName(S3SnapshotName("../.."), "w").ok());
  EXPECT_FALSE(CheckSnapshotName("..", "w").ok());
  EXPECT_FALSE(CheckSnapshotName("a/b", "w").ok());
  EXPECT_EQ(NormalizeEtag("W/\"abc-2\""), "abc-2");
  EXPECT_TRUE(CheckEtag("9b2cf535f27731c974343645a3985328-2", "w").ok());
  for (const char* bad : {"", "../x", "a/b", "a.b", "a b"}) {
    EXPECT_FALSE(CheckEtag(bad, "w").ok()) << bad;
  }
  EXPECT_TRUE(CheckRevision("refs/pr/1", "w").ok());
  EXPECT_FALSE(CheckRevision("../main", "w").ok());
  EXPECT_EQ(BlobLinkTarget(0, "e"), "../../blobs/e");
  EXPECT_EQ(BlobLinkTarget(2, "e"), "../../../../blobs/e");
}

}  // namespace
}  // namespace anisoscope::cache
