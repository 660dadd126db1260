// The bound: least recently used steps go first, a pinned step never, a blob two steps share
// only with the last of them, and the disk never holds more than the bound plus one file.
#include <unistd.h>

#include <filesystem>
#include <random>

#include "absl/strings/match.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/cache/cache_test_util.h"

namespace anisoscope::cache {
namespace {

using testing::DiskBytes;
using testing::File;
using testing::HubStep;
using testing::PinAndFetch;

class SourceCacheEviction : public ::testing::Test {
 protected:
  std::unique_ptr<SourceCache> Open(uint64_t max_bytes) {
    max_bytes_ = max_bytes;
    return SourceCache::Create({temp_.path(), max_bytes}).value();
  }
  // The bound plus one file, from the disk itself.
  void ExpectWithinBound(const char* after) {
    EXPECT_LE(DiskBytes(temp_.path()), max_bytes_ + largest_file_) << "after " << after;
  }
  bool Cached(const CacheStep& step) {
    return std::filesystem::exists(temp_.path() / step.repo.folder / "snapshots" / step.snapshot);
  }
  std::filesystem::path Snapshot(const CacheStep& step) {
    return temp_.path() / step.repo.folder / "snapshots" / step.snapshot;
  }

  TestTempDir temp_;
  uint64_t max_bytes_ = 0;
  uint64_t largest_file_ = 1000;
};

TEST_F(SourceCacheEviction, LeastRecentlyUsedStepGoesFirstAcrossRestarts) {
  auto cache = Open(3000);
  std::vector<CacheStep> steps;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    steps.push_back(HubStep("org/m", name, {File("w.bin", name, 1000)}, name));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PinAndFetch(*cache, steps[i]).ok());  // the pin is released at once
    ExpectWithinBound("fetch");
  }
  // a, b, c used 3, 2 and 1 hours ago; then a is read again.
  for (int i = 0; i < 3; ++i)
    testing::SetMtime(Snapshot(steps[i]), absl::Now() - absl::Hours(3 - i));
  ASSERT_TRUE(cache->FindComplete(steps[0]).ok());
  // A restarted worker sees the same recency (the snapshot folders' mtimes).
  cache = Open(3000);
  ASSERT_TRUE(PinAndFetch(*cache, steps[3]).ok());
  ExpectWithinBound("fetch d");
  EXPECT_TRUE(Cached(steps[0]));
  EXPECT_FALSE(Cached(steps[1]));  // the least recently used
  EXPECT_TRUE(Cached(steps[2]));
  // Its blob and its ref went with it (scan_cache_dir calls a ref to a missing commit corrupt).
  EXPECT_FALSE(
      std::filesystem::exists(temp_.path() / "models--org--m/blobs" / steps[1].files[0].etag));
  EXPECT_FALSE(std::filesystem::exists(temp_.path() / "models--org--m/refs/b"));
  EXPECT_TRUE(std::filesystem::exists(temp_.path() / "models--org--m/refs/a"));
  ASSERT_TRUE(PinAndFetch(*cache, steps[4]).ok());
  ExpectWithinBound("fetch e");
  EXPECT_FALSE(Cached(steps[2]));
  EXPECT_TRUE(Cached(steps[0]));
  EXPECT_EQ(cache->metrics().evicted_steps, 2u);
  EXPECT_EQ(cache->metrics().evicted_bytes, 2000u);
  EXPECT_EQ(cache->metrics().bytes_cached, 3000u);
}

TEST_F(SourceCacheEviction, PinnedStepIsNeverEvicted) {
  auto cache = Open(2000);
  const CacheStep a = HubStep("org/m", "a", {File("w.bin", "a", 1000)});
  const CacheStep b = HubStep("org/m", "b", {File("w.bin", "b", 1000)});
  const CacheStep c = HubStep("org/m", "c", {File("w.bin", "c", 1000)});
  const CacheStep d = HubStep("org/m", "d", {File("w.bin", "d", 1000)});
  auto pin_a = PinAndFetch(*cache, a).value();
  ASSERT_TRUE(PinAndFetch(*cache, b).ok());
  testing::SetMtime(Snapshot(a), absl::Now() - absl::Hours(2));  // a is the oldest, but pinned
  testing::SetMtime(Snapshot(b), absl::Now() - absl::Hours(1));
  auto pin_c = PinAndFetch(*cache, c).value();
  ExpectWithinBound("fetch c");
  EXPECT_TRUE(cache->FindComplete(a).ok());
  EXPECT_FALSE(Cached(b));
  // Everything left is in use: the error says so and names the file and the bound.
  const absl::Status full = PinAndFetch(*cache, d).status();
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "'w.bin' (1000 bytes)")) << full.message();
  EXPECT_TRUE(absl::StrContains(full.message(), "--cache-max-bytes 2000")) << full.message();
  EXPECT_TRUE(absl::StrContains(full.message(), "held by steps in use")) << full.message();
  ExpectWithinBound("refused d");
  // Once a's results are stored its pin goes, and d fits.
  pin_a = std::move(pin_c);
  ASSERT_TRUE(PinAndFetch(*cache, d).ok());
  EXPECT_FALSE(Cached(a));
  EXPECT_TRUE(Cached(c));
}

TEST_F(SourceCacheEviction, FileLargerThanTheBoundIsRefusedBeforeAnyEviction) {
  auto cache = Open(1000);
  const CacheStep a = HubStep("org/m", "a", {File("w.bin", "a", 600)});
  ASSERT_TRUE(PinAndFetch(*cache, a).ok());
  const absl::Status status =
      PinAndFetch(*cache, HubStep("org/m", "big", {File("big.bin", "big", 1001)})).status();
  EXPECT_TRUE(absl::IsResourceExhausted(status));
  EXPECT_TRUE(absl::StrContains(status.message(), "larger than the cache's bound")) << status;
  EXPECT_TRUE(Cached(a));
}

TEST_F(SourceCacheEviction, SharedBlobStaysWhileAStepStillLinksIt) {
  auto cache = Open(1300);
  // Two steps with identical weights (pythia#205: many step branches equal main).
  const StepFile shared = File("model.safetensors", "same-weights", 1000);
  const CacheStep a = HubStep("org/m", "a", {shared, File("config.json", "ca", 100)});
  const CacheStep b = HubStep("org/m", "b", {shared, File("config.json", "cb", 100)});
  ASSERT_TRUE(PinAndFetch(*cache, a).ok());
  ASSERT_TRUE(PinAndFetch(*cache, b).ok());
  EXPECT_EQ(DiskBytes(temp_.path()), 1200u);  // the weights once
  testing::SetMtime(Snapshot(a), absl::Now() - absl::Hours(2));
  testing::SetMtime(Snapshot(b), absl::Now() - absl::Hours(1));
  ASSERT_TRUE(PinAndFetch(*cache, HubStep("org/m", "c", {File("x", "c", 150)})).ok());
  EXPECT_FALSE(Cached(a));
  EXPECT_TRUE(cache->FindComplete(b).ok());  // the shared blob is still there
  ASSERT_TRUE(PinAndFetch(*cache, HubStep("org/m", "d", {File("x", "d", 1000)})).ok());
  EXPECT_FALSE(Cached(b));
  EXPECT_FALSE(std::filesystem::exists(temp_.path() / "models--org--m/blobs" / shared.etag));
  ExpectWithinBound("fetch d");
}

TEST_F(SourceCacheEviction, DownloadOfTheWrongSizeIsDroppedAndReleased) {
  auto cache = Open(1000);
  const CacheStep a = HubStep("org/m", "a", {File("w.bin", "a", 100)});
  auto pin = cache->Pin(a).value();
  auto pending = cache->BeginFile(pin, a.files[0]).value();
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(cache->metrics().bytes_reserved, 100u);
  const std::filesystem::path partial = pending->incomplete_path();
  EXPECT_TRUE(absl::EndsWith(partial.string(), ".incomplete"));
  ASSERT_EQ(write(pending->fd(), "short", 5), 5);
  const absl::Status committed = cache->CommitFile(std::move(*pending));
  EXPECT_TRUE(absl::IsDataLoss(committed)) << committed;
  EXPECT_TRUE(absl::StrContains(committed.message(), "'w.bin': 5 bytes downloaded")) << committed;
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_EQ(cache->Refresh().value().bytes_reserved, 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(cache->FinishStep(pin).status()));
}

TEST_F(SourceCacheEviction, RandomWorkloadNeverExceedsTheBoundPlusOneFile) {
  largest_file_ = 500;
  // Two steps held and a third half fetched fit (3 x 1500 bytes at most), so no refusal.
  auto cache = Open(5000);
  std::mt19937 random(38);
  std::vector<CacheStep> steps;
  for (int i = 0; i < 12; ++i) {
    std::vector<StepFile> files;
    for (int j = 0; j < 3; ++j) {
      const std::string seed = (i % 4 == 0 && j == 0) ? "shared" : absl::StrCat(i, "/", j);
      files.push_back(File(absl::StrCat("f", j, ".bin"), seed, 100 + (random() % 400)));
    }
    if (i % 4 == 0) files[0].size = 300;  // one blob, one size
    steps.push_back(HubStep("org/m", absl::StrCat("step", i), files));
  }
  std::vector<std::pair<StepPin, bool>> held;  // and whether it was complete
  for (int round = 0; round < 80; ++round) {
    const CacheStep& step = steps[random() % steps.size()];
    auto pin = cache->Pin(step).value();
    if (!cache->FindComplete(step).ok()) {
      for (const StepFile& file : step.files) {
        auto pending = cache->BeginFile(pin, file);
        ASSERT_TRUE(pending.ok()) << pending.status();
        ExpectWithinBound("BeginFile");
        if (!pending->has_value()) continue;
        const std::string content = testing::ContentOf(file);
        ASSERT_EQ(write((*pending)->fd(), content.data(), content.size() / 2),
                  static_cast<ssize_t>(content.size() / 2));
        ExpectWithinBound("half a download");
        if (random() % 10 == 0) break;  // an abandoned download: the file goes with it
        const size_t rest = content.size() - content.size() / 2;
        ASSERT_EQ(write((*pending)->fd(), content.data() + content.size() / 2, rest),
                  static_cast<ssize_t>(rest));
        ASSERT_TRUE(cache->CommitFile(std::move(**pending)).ok());
        ExpectWithinBound("CommitFile");
      }
    }
    const bool complete = cache->FindComplete(step).ok();
    if (random() % 3 == 0 && held.size() < 2) held.emplace_back(std::move(pin), complete);
    if (random() % 3 == 0 && !held.empty()) held.erase(held.begin());
    for (const auto& [kept, was_complete] : held) {
      // A step in use that was complete stays complete, whatever the others fetch.
      if (was_complete) {
        EXPECT_TRUE(cache->FindComplete(kept.step()).ok());
      }
    }
    ExpectWithinBound("round");
  }
  EXPECT_GT(cache->metrics().evicted_steps, 0u);
  EXPECT_LE(cache->Refresh().value().bytes_cached, 5000u);
}

TEST_F(SourceCacheEviction, OldUnlinkedBlobGoesBeforeAnyStep) {
  auto cache = Open(2000);
  const CacheStep a = HubStep("org/m", "a", {File("w.bin", "a", 1000)});
  ASSERT_TRUE(PinAndFetch(*cache, a).ok());
  // A blob a writer renamed in but died before linking.
  const std::filesystem::path orphan =
      temp_.path() / "models--org--m/blobs" / testing::FakeSha256("orphan");
  std::ofstream(orphan) << std::string(1000, 'o');
  testing::SetMtime(orphan, absl::Now() - absl::Hours(2));
  ASSERT_TRUE(PinAndFetch(*cache, HubStep("org/m", "b", {File("w.bin", "b", 1000)})).ok());
  EXPECT_FALSE(std::filesystem::exists(orphan));
  EXPECT_TRUE(Cached(a));
}

}  // namespace
}  // namespace anisoscope::cache
