// StepFetcher against hub_server.py: a fresh step lands in the Hugging Face layout, pinned; a
// cached one costs no request; faults (a cut, a wrong sha256, a size the listing understates,
// 429s, a bound smaller than the step) fail or retry only that step, storing nothing half.
#include "sources/fetch/step_fetcher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/sources/fetch/fetch_test_util.h"

namespace anisoscope::fetch::testing {
namespace {

using StepFetcherTest = FetchTest;

std::vector<FixtureFile> SmallStep(const std::string& seed) {
  return {{"config.json", "{\"hidden_size\": 8}\n"},
          {"model.safetensors", Bytes(seed + "model", 3 * kMiB / 2)},
          {"tokenizer/vocab.txt", "[PAD]\n[UNK]\nhello\n"}};
}

TEST_F(StepFetcherTest, FreshStepLandsInTheHubLayoutPinnedUntilDropped) {
  const FetchStep step = MakeStep("org/fresh", "step100", SmallStep("fresh"));
  ASSERT_EQ(step.cache_step.files.size(), 3u);
  std::vector<FetchProgress> reports;
  absl::StatusOr<FetchedStep> fetched =
      fetcher_->Fetch(step, [&](const FetchProgress& p) { reports.push_back(p); });
  ASSERT_TRUE(fetched.ok()) << fetched.status();

  const std::filesystem::path repo = cache_dir() / "models--org--fresh";
  EXPECT_EQ(fetched->folder, repo / "snapshots" / step.cache_step.snapshot);
  for (const auto& file : SmallStep("fresh")) {
    const std::filesystem::path entry = fetched->folder / file.path;
    EXPECT_TRUE(std::filesystem::is_symlink(entry)) << file.path;
    EXPECT_EQ(ReadAll(entry), file.content) << file.path;
  }
  EXPECT_EQ(std::filesystem::read_symlink(fetched->folder / "tokenizer/vocab.txt").string(),
            "../../../blobs/" + step.cache_step.files[2].etag);
  EXPECT_EQ(ReadAll(repo / "refs" / "step100"), step.cache_step.snapshot);
  EXPECT_FALSE(fetched->stats.cache_hit);
  EXPECT_EQ(fetched->stats.files_downloaded, 3);
  int64_t total = 0;
  for (const auto& file : step.cache_step.files) total += static_cast<int64_t>(file.size);
  EXPECT_EQ(fetched->stats.bytes_downloaded, total);
  EXPECT_GE(fetched->stats.bytes_fetched, total);
  EXPECT_GT(fetched->stats.bytes_per_second, 0);

  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().step_bytes, total);
  EXPECT_EQ(reports.back().step_size, total);
  EXPECT_EQ(reports.back().file_count, 3);
  EXPECT_GE(reports.back().cache_bytes, static_cast<uint64_t>(total));
  EXPECT_TRUE(Contains(reports.back().step, "hub:org/fresh revision step100"));

  EXPECT_EQ(Records(cache_dir(), "pins"), 1) << "the pin is held while the step is in use";
  { const FetchedStep dropped = *std::move(fetched); }
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
  EXPECT_EQ(Records(cache_dir(), "reservations"), 0);
}

TEST_F(StepFetcherTest, CachedStepCostsNoRequest) {
  const FetchStep step = MakeStep("org/cached", "main", SmallStep("cached"));
  ASSERT_TRUE(fetcher_->Fetch(step).ok());
  hub_->ResetStats();
  absl::StatusOr<FetchedStep> again = fetcher_->Fetch(step);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->stats.cache_hit);
  EXPECT_EQ(again->stats.bytes_fetched, 0);
  EXPECT_EQ(again->stats.files_downloaded, 0);
  const std::string stats = hub_->Stats();
  EXPECT_FALSE(Contains(stats, "/resolve/")) << stats;
  EXPECT_FALSE(Contains(stats, "/repos/")) << stats;
  EXPECT_EQ(cache_->metrics().hits, 1u);
}

TEST_F(StepFetcherTest, CutMidFileIsResumedByRange) {
  const std::string weights = Bytes("cut", 4 * kMiB);
  const FetchStep step = MakeStep("org/cut", "main", {{"model.safetensors", weights}});
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "cut", "after_bytes": 1048576, "listener": "cdn",
                                  "method": "GET"})")
                  .ok());
  absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(ReadAll(fetched->folder / "model.safetensors"), weights);
  EXPECT_GE(fetched->stats.retries, 1);
  const std::string stats = hub_->Stats();
  EXPECT_TRUE(Contains(stats, "\"ranges\": [\"bytes=")) << stats;
  EXPECT_TRUE(Contains(stats, "\"cut\"")) << stats;
}

TEST_F(StepFetcherTest, WrongSha256FailsNamingTheFileAndStoresNothing) {
  const FetchStep step =
      MakeStep("org/corrupt", "step7",
               {{"model.safetensors", Bytes("corrupt", 2 * kMiB)}, {"config.json", "{}\n"}});
  const uint64_t before = cache_->Refresh().value().bytes_cached;
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "corrupt", "offset": 12345, "listener": "cdn",
                                  "method": "GET", "times": -1})")
                  .ok());
  const absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_FALSE(fetched.ok());
  const std::string message(fetched.status().message());
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kDataLoss) << message;
  EXPECT_TRUE(Contains(message, "hub:org/corrupt")) << message;
  EXPECT_TRUE(Contains(message, "revision step7")) << message;
  EXPECT_TRUE(Contains(message, step.cache_step.snapshot)) << message;
  EXPECT_TRUE(Contains(message, "'model.safetensors'")) << message;
  EXPECT_TRUE(Contains(message, "sha256")) << message;

  const std::filesystem::path repo = cache_dir() / "models--org--corrupt";
  EXPECT_FALSE(
      std::filesystem::exists(repo / "snapshots" / step.cache_step.snapshot / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(repo / "blobs" / step.cache_step.files[0].etag));
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
  EXPECT_EQ(Records(cache_dir(), "reservations"), 0);
  const cache::SourceCacheMetrics after = cache_->Refresh().value();
  EXPECT_EQ(after.bytes_cached, before);
  EXPECT_EQ(after.bytes_reserved, 0u);
}

TEST_F(StepFetcherTest, ListingThatUnderstatesASizeIsRefusedWithinTheBound) {
  FetchStep step = MakeStep("org/liar", "main", {{"model.safetensors", Bytes("liar", 2 * kMiB)}});
  step.cache_step.files[0].size = kMiB;  // the listing says 1 MiB; the server sends 2
  step.files[0].expected_sha256.clear();
  MakeCache(kMiB + 4096);
  const absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_FALSE(fetched.ok());
  const std::string message(fetched.status().message());
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kDataLoss) << message;
  EXPECT_TRUE(Contains(message, "'model.safetensors'")) << message;
  EXPECT_TRUE(Contains(message, "hub:org/liar")) << message;
  EXPECT_LE(BlobBytes(cache_dir()), kMiB + 4096u);
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
  EXPECT_EQ(Records(cache_dir(), "reservations"), 0);
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
}

TEST_F(StepFetcherTest, TooManyRequestsThenSuccess) {
  const std::string weights = Bytes("busy", kMiB);
  const FetchStep step = MakeStep("org/busy", "main", {{"model.safetensors", weights}});
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "status", "status": 429, "times": 2,
                                  "match": "*/resolve/main/model.safetensors"})")
                  .ok());
  absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(ReadAll(fetched->folder / "model.safetensors"), weights);
  EXPECT_EQ(fetched->stats.retries, 2);
  EXPECT_TRUE(Contains(hub_->Stats(), "429")) << hub_->Stats();
}

TEST_F(StepFetcherTest, CacheBoundSmallerThanTheStepNamesTheFlag) {
  const FetchStep step =
      MakeStep("org/big", "step3", {{"model.safetensors", Bytes("big", 2 * kMiB)}});
  MakeCache(kMiB);
  const absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_FALSE(fetched.ok());
  const std::string message(fetched.status().message());
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kResourceExhausted) << message;
  EXPECT_TRUE(Contains(message, "--cache-max-bytes")) << message;
  EXPECT_TRUE(Contains(message, "hub:org/big revision step3")) << message;
  EXPECT_TRUE(Contains(message, "model.safetensors")) << message;
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
  EXPECT_EQ(BlobBytes(cache_dir()), 0u);
}

TEST_F(StepFetcherTest, ListsThatAreNotParallelAreRefused) {
  FetchStep step = MakeStep("org/shape", "main", {{"config.json", "{}\n"}});
  step.files.clear();
  const absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kInvalidArgument) << fetched.status();
}

}  // namespace
}  // namespace anisoscope::fetch::testing
