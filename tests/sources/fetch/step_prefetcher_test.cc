// StepPrefetcher: with a throttled Hub and a fake compute of fixed length, a 4-step series
// costs about max(sum of downloads, sum of computes) plus one step, not their sum; the depth
// bounds the steps held; Cancel stops between files or mid-file, promptly, and leaves
// nothing behind.
#include "sources/fetch/step_prefetcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/sources/fetch/fetch_test_util.h"

namespace anisoscope::fetch::testing {
namespace {

using Clock = std::chrono::steady_clock;
using StepPrefetcherTest = FetchTest;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST_F(StepPrefetcherTest, SeriesCostsTheLongerSumPlusOneStepNotBothSums) {
  constexpr int kSteps = 4;
  constexpr double kComputeSeconds = 0.25;
  std::vector<FetchStep> steps;
  for (int i = 0; i < kSteps; ++i) {
    const std::string branch = "step" + std::to_string(i * 1000);
    steps.push_back(
        MakeStep("org/series", branch,
                 {{"config.json", "{}\n"}, {"model.safetensors", Bytes(branch, 5 * kMiB)}}));
  }
  // 20 MB/s: about 0.26 s per step, as long as its compute.
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "throttle", "bytes_per_second": 20000000})").ok());

  StepPrefetcher prefetcher(fetcher_.get(), {.depth = 1});
  double downloads = 0;
  double longest_download = 0;
  int max_held = 0;
  const Clock::time_point start = Clock::now();
  ASSERT_TRUE(prefetcher.Start(steps[0]).ok());
  for (int n = 0; n < kSteps; ++n) {
    if (n + 1 < kSteps) {
      ASSERT_TRUE(prefetcher.Start(steps[n + 1]).ok());
    }
    absl::StatusOr<FetchedStep> fetched = prefetcher.Take(steps[n]);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_FALSE(fetched->stats.cache_hit);
    downloads += fetched->stats.seconds;
    longest_download = std::max(longest_download, fetched->stats.seconds);
    std::this_thread::sleep_for(std::chrono::duration<double>(kComputeSeconds));  // "compute"
    max_held = std::max(max_held, prefetcher.held());
  }
  const double wall = Since(start);
  const double computes = kSteps * kComputeSeconds;
  const double one_step = std::max(longest_download, kComputeSeconds);
  const double goal = std::max(downloads, computes) + one_step;
  std::printf(
      "pipeline: %d steps, wall %.3f s, sum download %.3f s, sum compute %.3f s, "
      "max+one step %.3f s, serial %.3f s\n",
      kSteps, wall, downloads, computes, goal, downloads + computes);
  RecordProperty("wall_seconds", std::to_string(wall));
  RecordProperty("sum_download_seconds", std::to_string(downloads));
  EXPECT_LE(max_held, 1);
  EXPECT_LT(wall, 0.85 * (downloads + computes)) << "downloads did not overlap computes";
  EXPECT_LT(wall, goal * 1.15 + 0.1);
}

TEST_F(StepPrefetcherTest, TakeWithoutStartFetchesNowAndStartIsIdempotent) {
  const FetchStep first = MakeStep("org/direct", "step1", {{"config.json", "{\"a\": 1}\n"}});
  const FetchStep second = MakeStep("org/direct", "step2", {{"config.json", "{\"a\": 2}\n"}});
  StepPrefetcher prefetcher(fetcher_.get());
  absl::StatusOr<FetchedStep> direct = prefetcher.Take(first);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(ReadAll(direct->folder / "config.json"), "{\"a\": 1}\n");
  ASSERT_TRUE(prefetcher.Start(second).ok());
  ASSERT_TRUE(prefetcher.Start(second).ok());
  absl::StatusOr<FetchedStep> prefetched = prefetcher.Take(second);
  ASSERT_TRUE(prefetched.ok()) << prefetched.status();
  EXPECT_EQ(ReadAll(prefetched->folder / "config.json"), "{\"a\": 2}\n");
  EXPECT_EQ(prefetcher.held(), 0);
}

TEST_F(StepPrefetcherTest, FailedFetchFailsOnlyItsOwnTake) {
  const FetchStep good = MakeStep("org/mixed", "step1", {{"model.safetensors", Bytes("g", kMiB)}});
  FetchStep bad = MakeStep("org/mixed", "step2", {{"model.safetensors", Bytes("b", kMiB)}});
  bad.files[0].expected_sha256 = std::string(64, '0');
  StepPrefetcher prefetcher(fetcher_.get());
  ASSERT_TRUE(prefetcher.Start(bad).ok());
  ASSERT_TRUE(prefetcher.Start(good).ok());
  const absl::StatusOr<FetchedStep> failed = prefetcher.Take(bad);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss) << failed.status();
  const absl::StatusOr<FetchedStep> fetched = prefetcher.Take(good);
  EXPECT_TRUE(fetched.ok()) << fetched.status();
}

TEST_F(StepPrefetcherTest, CancelStopsBetweenFilesAndLeavesNothingHeld) {
  std::vector<FixtureFile> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back({"model-0000" + std::to_string(i) + ".safetensors",
                     Bytes("shard" + std::to_string(i), 2 * kMiB)});
  }
  const FetchStep step = MakeStep("org/cancel", "main", files);
  const FetchStep next = MakeStep("org/cancel", "step9", {{"config.json", "{}\n"}});
  // 10 MB/s: about 0.2 s per file.
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "throttle", "bytes_per_second": 10000000})").ok());
  hub_->ResetStats();
  auto prefetcher = std::make_unique<StepPrefetcher>(fetcher_.get());
  ASSERT_TRUE(prefetcher->Start(step).ok());
  ASSERT_TRUE(prefetcher->Start(next).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Clock::time_point cancel = Clock::now();
  prefetcher->Cancel();
  const double cancel_seconds = Since(cancel);
  std::printf("cancel returned after %.3f s (a 2 MiB file at 10 MB/s is ~0.21 s)\n",
              cancel_seconds);
  EXPECT_LT(cancel_seconds, 1.0);
  EXPECT_EQ(prefetcher->Take(step).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(prefetcher->Start(next).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(prefetcher->held(), 0);
  prefetcher.reset();
  const std::string stats = hub_->Stats();
  EXPECT_FALSE(Contains(stats, "model-00003")) << "the last file was still requested";
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
  EXPECT_EQ(Records(cache_dir(), "reservations"), 0);
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
}

TEST_F(StepPrefetcherTest, CancelMidFileAbandonsTheTransferPromptlyAndLeavesNothingHeld) {
  const FetchStep step =
      MakeStep("org/midfile", "main", {{"model.safetensors", Bytes("big", 8 * kMiB)}});
  // 2 MB/s: the one file takes about 4 s.
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "throttle", "bytes_per_second": 2000000})").ok());
  hub_->ResetStats();
  std::atomic<int64_t> file_bytes{0};
  auto prefetcher = std::make_unique<StepPrefetcher>(
      fetcher_.get(), StepPrefetcherOptions{},
      [&](const FetchProgress& progress) { file_bytes = progress.file_bytes; });
  ASSERT_TRUE(prefetcher->Start(step).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t bytes_at_cancel = file_bytes.load();
  const Clock::time_point cancel = Clock::now();
  prefetcher->Cancel();
  const double cancel_seconds = Since(cancel);
  std::printf("mid-file cancel returned after %.3f s (%lld of %lld bytes in; the file is ~4 s)\n",
              cancel_seconds, static_cast<long long>(bytes_at_cancel),
              static_cast<long long>(8 * kMiB));
  EXPECT_GT(bytes_at_cancel, 0) << "the cancel came before the file began";
  EXPECT_LT(bytes_at_cancel, 8 * kMiB);
  EXPECT_LT(cancel_seconds, 1.0);
  EXPECT_LT(file_bytes.load(), 8 * kMiB) << "the file ran to its end";
  EXPECT_EQ(prefetcher->Take(step).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(prefetcher->held(), 0);
  prefetcher.reset();
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
  EXPECT_EQ(Records(cache_dir(), "reservations"), 0);
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
  EXPECT_EQ(BlobBytes(cache_dir()), 0u);
}

}  // namespace
}  // namespace anisoscope::fetch::testing
