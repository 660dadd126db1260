// Several worker PROCESSES of one node share the cache: forked children reserve, download,
// evict and pin at once; the disk never holds more than the bound plus one file, and no
// process ever loses a step it has pinned. A crashed worker's pin stops counting.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/cache/cache_test_util.h"

namespace anisoscope::cache {
namespace {

using testing::ContentOf;
using testing::DiskBytes;
using testing::File;
using testing::HubStep;

// Runs `body` in a child process; its exit status is `body`'s result (0 on success).
pid_t Spawn(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int ExitCode(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

void Report(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text << "\n";
}

// One worker: 25 units, each pinning a random step, fetching it unless cached, reading it
// back through the snapshot twice (with a pause between, while others evict), releasing it.
int WorkerLoop(const std::filesystem::path& dir, uint64_t max_bytes,
               const std::vector<CacheStep>& steps, int seed, const std::filesystem::path& report) {
  auto cache = SourceCache::Create({dir, max_bytes});
  if (!cache.ok()) return Report(report, cache.status().ToString()), 1;
  std::mt19937 random(seed);
  for (int unit = 0; unit < 25; ++unit) {
    const CacheStep& step = steps[random() % steps.size()];
    absl::StatusOr<StepPin> pin = testing::PinAndFetch(**cache, step);
    if (!pin.ok()) return Report(report, pin.status().ToString()), 2;
    for (int look = 0; look < 2; ++look) {
      absl::StatusOr<std::filesystem::path> found = (*cache)->FindComplete(step);
      if (!found.ok()) return Report(report, "pinned step lost: " + found.status().ToString()), 3;
      for (const StepFile& file : step.files) {
        if (testing::ReadAll(*found / file.path) != ContentOf(file)) {
          return Report(report, "pinned file changed: " + file.path), 4;
        }
      }
      usleep(static_cast<useconds_t>(random() % 3000));
    }
  }
  Report(report, absl::StrCat("evicted ", (*cache)->metrics().evicted_steps));
  return 0;
}

TEST(SourceCacheProcesses, ForkedWorkersKeepTheBoundAndNeverLoseAPinnedStep) {
  TestTempDir temp;
  const std::filesystem::path dir = temp.path() / "cache";
  // The ten steps hold ~14 kB: the workers evict; three pinned steps (<= 6.9 kB) always fit.
  constexpr uint64_t kMaxBytes = 9000;
  constexpr uint64_t kLargestFile = 2000;
  std::vector<CacheStep> steps;
  std::mt19937 random(7);
  for (int i = 0; i < 10; ++i) {
    const std::string repo = i % 2 == 0 ? "org/even" : "org/odd";
    // Steps 0, 2 and 4 share their weights (the same blob of org/even).
    const StepFile weights = i % 2 == 0 && i <= 4
                                 ? File("model.bin", "shared", 2000)
                                 : File("model.bin", absl::StrCat("w", i), 500 + random() % 1500);
    steps.push_back(HubStep(repo, absl::StrCat("step", i),
                            {weights, File("cfg/config.json", absl::StrCat("c", i), 300)}));
  }
  ASSERT_TRUE(SourceCache::Create({dir, kMaxBytes}).ok());

  const std::filesystem::path stop = temp.path() / "stop";
  const std::filesystem::path peak = temp.path() / "peak";
  const pid_t monitor = Spawn([&] {
    uint64_t highest = 0;
    while (!std::filesystem::exists(stop)) {
      highest = std::max(highest, DiskBytes(dir));
      usleep(100);
    }
    Report(peak, std::to_string(highest));
    return 0;
  });
  std::vector<pid_t> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(Spawn([&, i] {
      return WorkerLoop(dir, kMaxBytes, steps, 100 + i, temp.path() / absl::StrCat("worker", i));
    }));
  }
  uint64_t evicted = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    const std::filesystem::path report = temp.path() / absl::StrCat("worker", i);
    EXPECT_EQ(ExitCode(workers[i]), 0) << testing::ReadAll(report);
    const std::string text = testing::ReadAll(report);
    if (text.rfind("evicted ", 0) == 0) evicted += std::stoull(text.substr(8));
  }
  std::ofstream(stop).close();
  ASSERT_EQ(ExitCode(monitor), 0);
  const uint64_t highest = std::stoull(testing::ReadAll(peak));
  EXPECT_LE(highest, kMaxBytes + kLargestFile);
  EXPECT_GT(highest, kMaxBytes / 2);  // the monitor saw a cache under pressure
  EXPECT_GT(evicted, 0u);
  auto cache = SourceCache::Create({dir, kMaxBytes}).value();
  const SourceCacheMetrics after = cache->Refresh().value();
  EXPECT_LE(after.bytes_cached, kMaxBytes);
  EXPECT_EQ(after.bytes_reserved, 0u);  // every reservation released
  for (const auto& repo : {"models--org--even", "models--org--odd"}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir / repo / "blobs")) {
      EXPECT_EQ(entry.path().extension(), "") << entry.path();  // no .incomplete left
    }
  }
}

TEST(SourceCacheProcesses, AnotherProcessCannotEvictAPinnedStepUntilItsOwnerDies) {
  TestTempDir temp;
  const CacheStep a = HubStep("org/m", "a", {File("w.bin", "a", 1000)});
  const CacheStep b = HubStep("org/m", "b", {File("w.bin", "b", 1000)});
  const CacheStep c = HubStep("org/m", "c", {File("w.bin", "c", 1000)});
  auto cache = SourceCache::Create({temp.path(), 2000}).value();
  ASSERT_TRUE(testing::PinAndFetch(*cache, a).ok());
  ASSERT_TRUE(testing::PinAndFetch(*cache, b).ok());
  const auto snapshot = [&](const CacheStep& step) {
    return temp.path() / step.repo.folder / "snapshots" / step.snapshot;
  };
  testing::SetMtime(snapshot(a), absl::Now() - absl::Hours(2));  // a is the LRU step
  testing::SetMtime(snapshot(b), absl::Now() - absl::Hours(1));

  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const pid_t child = Spawn([&] {
    auto own = SourceCache::Create({temp.path(), 2000});
    if (!own.ok()) return 1;
    absl::StatusOr<StepPin> pin = (*own)->Pin(a);
    if (!pin.ok() || !(*own)->FindComplete(a).ok()) return 2;
    // Pinning touched a: make it the LRU step again, so only the pin protects it.
    testing::SetMtime(snapshot(a), absl::Now() - absl::Hours(2));
    char byte = 'p';
    if (write(from_child[1], &byte, 1) != 1) return 3;
    (void)!read(to_child[0], &byte, 1);  // wait, then die without releasing the pin
    _exit(0);
  });
  char byte = 0;
  ASSERT_EQ(read(from_child[0], &byte, 1), 1);
  ASSERT_TRUE(testing::PinAndFetch(*cache, c).ok());
  EXPECT_TRUE(cache->FindComplete(a).ok());  // pinned by the other process
  EXPECT_FALSE(std::filesystem::exists(snapshot(b)));

  ASSERT_EQ(write(to_child[1], &byte, 1), 1);
  EXPECT_EQ(ExitCode(child), 0);
  // The crashed worker's pin no longer counts: a is evicted as the LRU step (the check above
  // touched it: its age is set again).
  testing::SetMtime(snapshot(a), absl::Now() - absl::Hours(2));
  testing::SetMtime(snapshot(c), absl::Now() - absl::Hours(1));
  ASSERT_TRUE(testing::PinAndFetch(*cache, b).ok());
  EXPECT_FALSE(std::filesystem::exists(snapshot(a)));
  EXPECT_TRUE(std::filesystem::exists(snapshot(c)));
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
}

}  // namespace
}  // namespace anisoscope::cache
