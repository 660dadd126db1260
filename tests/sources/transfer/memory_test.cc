// A download streams to disk: 256 MiB through the client (and the in-process server) leave
// the process's peak resident size less than 64 MiB above where it started.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "common/process_memory.h"
#include "sources/transfer/http_client.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/transfer/fault_server.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(MemoryTest, A256MiBDownloadGrowsPeakResidentByLessThan64MiB) {
  const int64_t size = 256 * kMiB;
  std::atomic<int> served{0};
  FaultServer server([&](FaultServer& self, httplib::Server& http) {
    http.Get("/weights", [&](const httplib::Request& request, httplib::Response& response) {
      self.ServeBlob(request, response, BlobPlan{.size = size}, &served);
    });
  });
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  TestTempDir dir;
  DownloadRequest request;
  request.url = server.Url("/weights");
  request.path = dir.File("weights.incomplete");
  request.expected_size = size;

  if (!anisoscope::ResetPeakResident())
    GTEST_LOG_(INFO) << "clear_refs refused: peak since start measured";
  const uint64_t before = PeakResidentBytes();
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  const uint64_t after = PeakResidentBytes();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->bytes, size);
  EXPECT_EQ(std::filesystem::file_size(request.path), static_cast<uintmax_t>(size));
  ASSERT_GT(before, 0u);
  RecordProperty("peak_resident_growth_bytes", std::to_string(after - before));
  EXPECT_LT(after - before, static_cast<uint64_t>(64 * kMiB))
      << "peak resident grew from " << before << " to " << after;
}

}  // namespace
}  // namespace anisoscope::transfer::testing
