// A listing is written by a stranger: no name in it writes or links outside the cache, and
// an entry someone planted is refused rather than followed.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/cache/cache_test_util.h"

namespace anisoscope::cache {
namespace {

using testing::File;
using testing::HubStep;

// Every path beneath `dir`, links not followed.
std::set<std::string> Tree(const std::filesystem::path& dir) {
  std::set<std::string> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    paths.insert(entry.path().lexically_relative(dir).string());
  }
  return paths;
}

TEST(SourceCacheHostileNames, HostileFileNamesAreRefusedNamingRepoRevisionAndName) {
  TestTempDir temp;
  const std::filesystem::path cache_dir = temp.path() / "cache";
  auto cache = SourceCache::Create({cache_dir, 1 << 20}).value();
  const std::set<std::string> outside_before = Tree(temp.path());
  const std::string nul("a\0b", 3);
  for (const std::string& bad :
       {std::string("../x"), std::string("../../../../escape"), std::string("/tmp/abs"),
        std::string("a//b"), std::string("./a"), std::string("a/../../b"), std::string("a\\b"), nul,
        std::string("")}) {
    const CacheStep step = HubStep("org/m", "s", {File(bad, "x", 10)}, "step1");
    const absl::Status pinned = cache->Pin(step).status();
    EXPECT_TRUE(absl::IsInvalidArgument(pinned)) << bad;
    EXPECT_TRUE(absl::StrContains(pinned.message(), "hub:org/m at ")) << pinned.message();
    EXPECT_TRUE(absl::StrContains(pinned.message(), "(revision step1)")) << pinned.message();
    EXPECT_TRUE(absl::StrContains(pinned.message(), "file name '")) << pinned.message();
    EXPECT_TRUE(absl::IsInvalidArgument(cache->FindComplete(step).status())) << bad;
  }
  // A good pin cannot smuggle a bad file into BeginFile either.
  auto pin = cache->Pin(HubStep("org/m", "s", {File("ok.bin", "ok", 10)})).value();
  EXPECT_TRUE(absl::IsInvalidArgument(cache->BeginFile(pin, File("../x", "x", 10)).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(cache->BeginFile(pin, StepFile{"ok.bin", "../../etc", 10}).status()));
  // A hostile revision and a snapshot that is not a commit.
  EXPECT_FALSE(cache->Pin(HubStep("org/m", "s", {}, "../../refs")).ok());
  CacheStep not_commit = HubStep("org/m", "s", {});
  not_commit.snapshot = "..";
  EXPECT_FALSE(cache->Pin(not_commit).ok());
  // Nothing was written outside the cache folder.
  std::set<std::string> outside_after;
  for (const std::string& path : Tree(temp.path())) {
    if (!absl::StartsWith(path, "cache")) outside_after.insert(path);
  }
  std::set<std::string> outside_expected;
  for (const std::string& path : outside_before) {
    if (!absl::StartsWith(path, "cache")) outside_expected.insert(path);
  }
  EXPECT_EQ(outside_after, outside_expected);
}

TEST(SourceCacheHostileNames, PlantedEntryLinkLeadingOutIsRefused) {
  TestTempDir temp;
  const std::filesystem::path cache_dir = temp.path() / "cache";
  const std::filesystem::path secret = temp.path() / "secret";
  std::ofstream(secret) << std::string(10, 's');  // the expected size, to tempt a size check
  auto cache = SourceCache::Create({cache_dir, 1 << 20}).value();
  const CacheStep step = HubStep("org/m", "s", {File("model.bin", "w", 10)});
  auto pin = cache->Pin(step).value();
  ASSERT_TRUE(testing::Fetch(*cache, pin).ok());
  const std::filesystem::path entry =
      cache_dir / "models--org--m" / "snapshots" / step.snapshot / "model.bin";
  for (const std::string& planted :
       {secret.string(), std::string("../../../../secret"), std::string("../../refs/x")}) {
    std::filesystem::remove(entry);
    std::filesystem::create_symlink(planted, entry);
    const absl::Status found = cache->FindComplete(step).status();
    EXPECT_TRUE(absl::IsPermissionDenied(found)) << planted << ": " << found;
    EXPECT_TRUE(absl::StrContains(found.message(), "'model.bin'")) << found.message();
    EXPECT_FALSE(absl::StrContains(found.message(), "ssssssssss"));  // never the content
  }
  // Fetching the step again replaces the planted link with the right one.
  ASSERT_TRUE(cache->BeginFile(pin, step.files[0]).ok());
  EXPECT_EQ(std::filesystem::read_symlink(entry).string(), "../../blobs/" + step.files[0].etag);
  EXPECT_TRUE(cache->FindComplete(step).ok());
  EXPECT_EQ(testing::ReadAll(secret), std::string(10, 's'));
}

TEST(SourceCacheHostileNames, NameThroughAPlantedFolderLinkIsRefused) {
  TestTempDir temp;
  const std::filesystem::path cache_dir = temp.path() / "cache";
  const std::filesystem::path elsewhere = temp.path() / "elsewhere";
  std::filesystem::create_directories(elsewhere);
  auto cache = SourceCache::Create({cache_dir, 1 << 20}).value();
  const CacheStep step = HubStep("org/m", "s", {File("sub/model.bin", "w", 10)});
  const std::filesystem::path snapshot = cache_dir / "models--org--m" / "snapshots" / step.snapshot;
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directory_symlink(elsewhere, snapshot / "sub");
  auto pin = cache->Pin(step).value();
  const absl::Status fetched = testing::Fetch(*cache, pin).status();
  EXPECT_TRUE(absl::IsPermissionDenied(fetched)) << fetched;
  EXPECT_TRUE(absl::StrContains(fetched.message(), "'sub/model.bin'")) << fetched.message();
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere));
  EXPECT_TRUE(absl::IsPermissionDenied(cache->FindComplete(step).status()));
  // The download it refused left no reservation behind.
  EXPECT_EQ(cache->Refresh().value().bytes_reserved, 0u);
}

TEST(SourceCacheHostileNames, PlantedBlobsFolderLinkIsRefused) {
  TestTempDir temp;
  const std::filesystem::path cache_dir = temp.path() / "cache";
  const std::filesystem::path elsewhere = temp.path() / "elsewhere";
  std::filesystem::create_directories(elsewhere);
  std::filesystem::create_directories(cache_dir / "models--org--m");
  std::filesystem::create_directory_symlink(elsewhere, cache_dir / "models--org--m" / "blobs");
  auto cache = SourceCache::Create({cache_dir, 1 << 20}).value();
  const CacheStep step = HubStep("org/m", "s", {File("model.bin", "w", 10)});
  auto pin = cache->Pin(step).value();
  EXPECT_FALSE(testing::Fetch(*cache, pin).ok());
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere));
}

}  // namespace
}  // namespace anisoscope::cache
