// DownloadToFile against a server that fails the ways real ones do: each test names the
// fault, and checks what reaches the disk, what was asked for, and the error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>

#include "sources/transfer/http_client.h"
#include "sources/transfer/http_error.h"
#include "tests/sources/transfer/blob_download_test.h"
#include "tests/sources/transfer/fault_server.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

constexpr int64_t kMiB = 1 << 20;

using DownloadFaultsTest = BlobDownloadTest;

TEST_F(DownloadFaultsTest, ACutMidFileIsResumedWithRangeWithoutRefetching) {
  const int64_t size = 4 * kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = size, .cut_after = kMiB});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  std::vector<DownloadProgress> progress;
  DownloadRequest request = Request(*server, size);
  request.on_progress = [&](const DownloadProgress& p) { progress.push_back(p); };

  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->bytes, size);
  EXPECT_EQ(result->sha256, BlobSha256(size));
  EXPECT_EQ(ReadFile(request.path), BlobBytes(0, size));
  const std::vector<RecordedRequest> requests = server->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_FALSE(requests[0].Has("Range"));
  EXPECT_EQ(requests[1].Header("Range"), "bytes=1048576-");
  // Not a byte fetched twice.
  EXPECT_EQ(server->body_bytes_sent(), size);
  EXPECT_EQ(result->counters.bytes_fetched, size);
  EXPECT_EQ(result->counters.attempts, 2);
  EXPECT_EQ(result->counters.retries, 1);
  EXPECT_EQ(client->counters().retries, 1);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().bytes, size);
  EXPECT_EQ(progress.back().total, size);
  EXPECT_GT(progress.back().bytes_per_second, 0);
}

TEST_F(DownloadFaultsTest, AServerThatIgnoresRangeIsReadFromByteZero) {
  const int64_t size = 2 * kMiB;
  std::unique_ptr<FaultServer> server =
      Serve({.size = size, .cut_after = kMiB / 2, .ignore_range = true});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  const DownloadRequest request = Request(*server, size);
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReadFile(request.path), BlobBytes(0, size));
  ASSERT_EQ(server->requests().size(), 2u);
  EXPECT_EQ(server->requests()[1].Header("Range"), "bytes=524288-");
}

TEST_F(DownloadFaultsTest, AFileLeftOnDiskIsHashedAndContinued) {
  const int64_t size = 3 * kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = size});
  const DownloadRequest first = Request(*server, size);
  {
    std::ofstream partial(first.path, std::ios::binary);
    partial << BlobBytes(0, kMiB + 17);
  }
  DownloadRequest request = first;
  request.resume_existing_file = true;
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->resumed_from, kMiB + 17);
  EXPECT_EQ(result->sha256, BlobSha256(size));
  ASSERT_EQ(server->requests().size(), 1u);
  EXPECT_EQ(server->requests()[0].Header("Range"), "bytes=1048593-");
  EXPECT_EQ(server->body_bytes_sent(), size - kMiB - 17);
}

TEST_F(DownloadFaultsTest, ATruncatedBodyIsRefusedNamingBothSizes) {
  // The listing says 1.5 MiB; the server has 1 MiB, and says so (Content-Length) or not
  // (chunked): refused before the body in one case, at its end in the other.
  for (const bool chunked : {false, true}) {
    std::unique_ptr<FaultServer> server = Serve({.size = kMiB, .chunked = chunked});
    std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
    DownloadRequest request = Request(*server, kMiB);
    request.expected_size = kMiB + kMiB / 2;
    const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
    ASSERT_FALSE(result.ok()) << "chunked " << chunked;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
    const std::string message(result.status().message());
    EXPECT_TRUE(Contains(message, "1048576")) << message;
    EXPECT_TRUE(Contains(message, "1572864")) << message;
    EXPECT_TRUE(Contains(message, server->Url("/blob"))) << message;
    EXPECT_EQ(server->requests().size(), 1u) << "a size that disagrees is not retried";
    EXPECT_FALSE(std::filesystem::exists(request.path)) << "nothing half-stored";
  }
}

TEST_F(DownloadFaultsTest, AWrongSha256IsRefusedNamingBothHashes) {
  const int64_t size = kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = size});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  DownloadRequest request = Request(*server, size);
  const std::string listed(64, 'a');
  request.expected_sha256 = listed;
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  const std::string message(result.status().message());
  EXPECT_TRUE(Contains(message, listed)) << message;
  EXPECT_TRUE(Contains(message, BlobSha256(size))) << message;
  EXPECT_FALSE(std::filesystem::exists(request.path));
}

TEST_F(DownloadFaultsTest, ABodyLongerThanTheListingIsCutAtTheBound) {
  // The listing lies: 1 MiB, and the server streams 16 MiB without a length. The file never
  // grows past the bound.
  const int64_t bound = kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = 16 * kMiB, .chunked = true});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  DownloadRequest request = Request(*server, bound);
  request.expected_sha256.clear();
  request.keep_partial_file = true;
  int64_t largest_seen = 0;
  request.on_progress = [&](const DownloadProgress&) {
    struct stat info {};
    if (::stat(request.path.c_str(), &info) == 0)
      largest_seen = std::max<int64_t>(largest_seen, info.st_size);
  };
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_TRUE(Contains(std::string(result.status().message()), "runs past the expected 1048576"))
      << result.status();
  EXPECT_LE(std::filesystem::file_size(request.path), static_cast<uintmax_t>(bound));
  EXPECT_LE(largest_seen, bound);
  EXPECT_EQ(server->requests().size(), 1u);
  // Once cut, the rest of the 16 MiB is not read: at most what was in flight.
  EXPECT_LT(server->body_bytes_sent(), 8 * kMiB);
}

TEST_F(DownloadFaultsTest, ADeclaredLengthPastTheListingIsRefusedBeforeAnyByte) {
  std::unique_ptr<FaultServer> server = Serve({.size = 4 * kMiB});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  DownloadRequest request = Request(*server, kMiB);
  request.keep_partial_file = true;
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(std::string(result.status().message()), "4194304")) << result.status();
  EXPECT_EQ(std::filesystem::file_size(request.path), 0u);
}

TEST_F(DownloadFaultsTest, AStallTimesOutQuicklyNamingTheOption) {
  std::unique_ptr<FaultServer> server = Serve({.size = kMiB, .stall_ms = 5000});
  TransferOptions options = FastOptions();
  options.max_attempts = 1;
  std::unique_ptr<HttpClient> client = MakeClient(options);
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(Request(*server, kMiB));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  const std::string message(result.status().message());
  EXPECT_TRUE(Contains(message, "no byte for 500ms (stall_timeout)")) << message;
  EXPECT_TRUE(Contains(message, "after 1 attempt (max_attempts)")) << message;
  EXPECT_LT(seconds, 5.0);  // generous: the machine may be busy
}

TEST_F(DownloadFaultsTest, ACutEveryTimeFailsAfterTheAttemptBound) {
  // Each answer is cut 256 KiB in, and each retry resumes: four attempts get 1 MiB of 2.
  const int64_t size = 2 * kMiB;
  std::unique_ptr<FaultServer> server =
      Serve({.size = size, .cut_after = 256 << 10, .cut_requests = 100});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  const DownloadRequest request = Request(*server, size);
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_TRUE(Contains(std::string(result.status().message()), "after 4 attempts (max_attempts)"))
      << result.status();
  const std::vector<RecordedRequest> requests = server->requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[3].Header("Range"), "bytes=786432-");
  EXPECT_FALSE(std::filesystem::exists(request.path));
}

}  // namespace
}  // namespace anisoscope::transfer::testing
