// A step streams to disk: a 512 MiB file fetched through the Hub server into the cache
// leaves this process's peak resident size less than 64 MiB above where it started.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "common/process_memory.h"
#include "tests/sources/fetch/fetch_test_util.h"

namespace anisoscope::fetch::testing {
namespace {

using StepFetchMemoryTest = FetchTest;

TEST_F(StepFetchMemoryTest, A512MiBFileGrowsPeakResidentByLessThan64MiB) {
  constexpr int64_t kSize = 512 * kMiB;
  // Sparse: no disk or CPU spent on the fixture; the server hashes it once (about 2 s).
  const FetchStep step =
      MakeStep("org/huge", "main", {{"model.safetensors", "", kSize}, {"config.json", "{}\n"}});
  MakeCache(kSize + 16 * kMiB);
  if (!anisoscope::ResetPeakResident())
    GTEST_LOG_(INFO) << "clear_refs refused: peak since start measured";
  const uint64_t before = PeakResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t after = PeakResidentBytes();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(std::filesystem::file_size(fetched->folder / "model.safetensors"),
            static_cast<uintmax_t>(kSize));
  ASSERT_GT(before, 0u);
  std::printf("512 MiB fetched in %.2f s (%.0f MB/s); peak resident %.1f -> %.1f MiB\n", seconds,
              kSize / seconds / 1e6, before / 1048576.0, after / 1048576.0);
  RecordProperty("peak_resident_growth_bytes", std::to_string(after - before));
  EXPECT_LT(after - before, static_cast<uint64_t>(64 * kMiB));
}

}  // namespace
}  // namespace anisoscope::fetch::testing
