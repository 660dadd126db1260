// A step streams to disk: a 512 MiB file fetched through the Hub server into the cache
// leaves this process's peak resident size less than 64 MiB above where it started. The
// issue's figure is for 2 GB: ANISOSCOPE_FETCH_MEMORY_MIB=2048 runs that size (CI keeps 512).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/process_memory.h"
#include "tests/sources/fetch/fetch_test_util.h"

namespace anisoscope::fetch::testing {
namespace {

using StepFetchMemoryTest = FetchTest;

// The file's size in MiB: $ANISOSCOPE_FETCH_MEMORY_MIB, else 512.
int64_t FileMiB() {
  const char* text = std::getenv("ANISOSCOPE_FETCH_MEMORY_MIB");
  const int64_t mib = text != nullptr ? std::atoll(text) : 0;
  return mib > 0 ? mib : 512;
}

TEST_F(StepFetchMemoryTest, ALargeFileGrowsPeakResidentByLessThan64MiB) {
  const int64_t size = FileMiB() * kMiB;
  // The server hashes the file at its first request (about 4 s a GiB here): past 512 MiB
  // that outlasts the fixture's 2 s stall timeout, so this client waits longer.
  transfer::TransferOptions patient;
  patient.stall_timeout = absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<transfer::HttpClient>> client =
      transfer::HttpClient::Create(patient);
  ASSERT_TRUE(client.ok()) << client.status();
  fetcher_.reset();
  client_ = *std::move(client);
  // Sparse: no disk or CPU spent on the fixture; the server hashes it once (about 2 s).
  const FetchStep step =
      MakeStep("org/huge", "main", {{"model.safetensors", "", size}, {"config.json", "{}\n"}});
  MakeCache(size + 16 * kMiB);
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
            static_cast<uintmax_t>(size));
  ASSERT_GT(before, 0u);
  std::printf("%lld MiB fetched in %.2f s (%.0f MB/s); peak resident %.1f -> %.1f MiB\n",
              static_cast<long long>(FileMiB()), seconds, size / seconds / 1e6,
              before / 1048576.0, after / 1048576.0);
  RecordProperty("peak_resident_growth_bytes", std::to_string(after - before));
  EXPECT_LT(after - before, static_cast<uint64_t>(64 * kMiB));
}

}  // namespace
}  // namespace anisoscope::fetch::testing
