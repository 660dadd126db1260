// A request's cancel flag, set from another thread: a download or a Get stops mid-body, in a
// stall or in the pause before a retry, promptly (well within 0.5 s of the flag), without a
// retry, its file removed; a flag set before the call sends nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "sources/transfer/http_client.h"
#include "tests/sources/transfer/blob_download_test.h"
#include "tests/sources/transfer/fault_server.h"
#include "tests/sources/transfer/transfer_test_util.h"

namespace anisoscope::transfer::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMiB = 1 << 20;
// What the flag may take to be obeyed: CurlExchange reads it every 100 ms; the rest is slack
// for a busy machine.
constexpr double kPromptSeconds = 0.5;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Sets `flag` after `delay` on its own thread and keeps when it did; joined by the destructor.
class CancelAfter {
 public:
  CancelAfter(std::atomic<bool>* flag, std::chrono::milliseconds delay)
      : thread_([this, flag, delay] {
          std::this_thread::sleep_for(delay);
          set_at_ = Clock::now();
          flag->store(true);
        }) {}
  ~CancelAfter() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // Seconds from the flag to now (joins first).
  double SecondsSinceSet() {
    Join();
    return Since(set_at_);
  }

 private:
  Clock::time_point set_at_;
  std::thread thread_;
};

class CancelTest : public BlobDownloadTest {
 protected:
  // Of the blob, through a URL whose query stands for a CDN's signature, with the flag.
  DownloadRequest CancellableRequest(const FaultServer& server, int64_t size) {
    DownloadRequest request = Request(server, size, "?X-Amz-Signature=s3cr3t");
    request.cancel = &cancel_;
    return request;
  }

  // CANCELLED, naming the URL without its query.
  void ExpectCancelledNamingTheUrl(const absl::Status& status, const FaultServer& server) {
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
    const std::string message(status.message());
    EXPECT_TRUE(Contains(message, server.Url("/blob"))) << message;
    EXPECT_FALSE(Contains(message, "s3cr3t")) << message;
    EXPECT_FALSE(Contains(message, "?")) << message;
  }

  std::atomic<bool> cancel_{false};
};

TEST_F(CancelTest, ADownloadCancelledMidFileStopsPromptlyWithoutRetryAndRemovesTheFile) {
  // 64 KiB every 20 ms: 8 MiB take about 2.6 s.
  const int64_t size = 8 * kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = size, .piece_delay_ms = 20});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  DownloadRequest request = CancellableRequest(*server, size);
  int64_t progress_bytes = 0;
  request.on_progress = [&](const DownloadProgress& at) { progress_bytes = at.bytes; };

  CancelAfter canceller(&cancel_, std::chrono::milliseconds(300));
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  const double after_flag = canceller.SecondsSinceSet();
  std::printf("download cancelled mid-file: returned %.3f s after the flag, %lld bytes in\n",
              after_flag, static_cast<long long>(progress_bytes));
  ASSERT_FALSE(result.ok());
  ExpectCancelledNamingTheUrl(result.status(), *server);
  EXPECT_LT(after_flag, kPromptSeconds);
  EXPECT_GT(progress_bytes, 0) << "the flag came before the body did";
  EXPECT_LT(server->body_bytes_sent(), size);
  EXPECT_EQ(server->requests().size(), 1u);
  EXPECT_EQ(client->counters().attempts, 1);
  EXPECT_EQ(client->counters().retries, 0);
  EXPECT_FALSE(std::filesystem::exists(request.path));
}

TEST_F(CancelTest, ACancelledDownloadKeepsItsPartialFileWhenAsked) {
  const int64_t size = 8 * kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = size, .piece_delay_ms = 20});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  DownloadRequest request = CancellableRequest(*server, size);
  request.keep_partial_file = true;
  CancelAfter canceller(&cancel_, std::chrono::milliseconds(300));
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  ASSERT_TRUE(std::filesystem::exists(request.path));
  const std::string kept = ReadFile(request.path);
  EXPECT_GT(kept.size(), 0u);
  EXPECT_LT(kept.size(), static_cast<size_t>(size));
  EXPECT_EQ(kept, BlobBytes(0, static_cast<int64_t>(kept.size())));
}

TEST_F(CancelTest, ACancelDuringAStallIsSeenWithoutWaitingForAByte) {
  std::unique_ptr<FaultServer> server = Serve({.size = kMiB, .stall_ms = 5000});
  TransferOptions options = FastOptions();
  options.stall_timeout = absl::Seconds(30);
  std::unique_ptr<HttpClient> client = MakeClient(options);
  const DownloadRequest request = CancellableRequest(*server, kMiB);
  CancelAfter canceller(&cancel_, std::chrono::milliseconds(300));
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  const double after_flag = canceller.SecondsSinceSet();
  std::printf("download cancelled in a stall: returned %.3f s after the flag\n", after_flag);
  ASSERT_FALSE(result.ok());
  ExpectCancelledNamingTheUrl(result.status(), *server);
  EXPECT_LT(after_flag, kPromptSeconds);
  EXPECT_EQ(server->requests().size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(request.path));
}

TEST_F(CancelTest, ACancelDuringTheBackoffPauseEndsItEarly) {
  // Every answer is cut; the pause before the retry is 10 s.
  std::unique_ptr<FaultServer> server =
      Serve({.size = kMiB, .cut_after = 64 << 10, .cut_requests = 100});
  TransferOptions options = FastOptions();
  options.initial_backoff = absl::Seconds(10);
  options.max_backoff = absl::Seconds(10);
  std::unique_ptr<HttpClient> client = MakeClient(options);
  const DownloadRequest request = CancellableRequest(*server, kMiB);
  CancelAfter canceller(&cancel_, std::chrono::milliseconds(300));
  const absl::StatusOr<DownloadResult> result = client->DownloadToFile(request);
  const double after_flag = canceller.SecondsSinceSet();
  std::printf("download cancelled in its backoff: returned %.3f s after the flag\n", after_flag);
  ASSERT_FALSE(result.ok());
  ExpectCancelledNamingTheUrl(result.status(), *server);
  EXPECT_LT(after_flag, kPromptSeconds);
  EXPECT_EQ(server->requests().size(), 1u);
  EXPECT_EQ(client->counters().retries, 0);
  EXPECT_FALSE(std::filesystem::exists(request.path));
}

TEST_F(CancelTest, AFlagSetBeforeTheCallSendsNoRequest) {
  std::unique_ptr<FaultServer> server = Serve({.size = kMiB});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  cancel_ = true;
  const DownloadRequest request = CancellableRequest(*server, kMiB);
  const absl::StatusOr<DownloadResult> downloaded = client->DownloadToFile(request);
  ExpectCancelledNamingTheUrl(downloaded.status(), *server);
  EXPECT_FALSE(std::filesystem::exists(request.path));

  GetRequest get;
  get.url = request.url;
  get.cancel = &cancel_;
  const absl::StatusOr<HttpResponse> got = client->Get(get);
  ExpectCancelledNamingTheUrl(got.status(), *server);
  EXPECT_TRUE(server->requests().empty());
  EXPECT_EQ(client->counters().attempts, 0);
}

TEST_F(CancelTest, AGetCancelledMidBodyStopsPromptly) {
  const int64_t size = 8 * kMiB;
  std::unique_ptr<FaultServer> server = Serve({.size = size, .piece_delay_ms = 20});
  std::unique_ptr<HttpClient> client = MakeClient(FastOptions());
  GetRequest get;
  get.url = server->Url("/blob?X-Amz-Signature=s3cr3t");
  get.max_body_bytes = size;
  get.cancel = &cancel_;
  CancelAfter canceller(&cancel_, std::chrono::milliseconds(300));
  const absl::StatusOr<HttpResponse> got = client->Get(get);
  const double after_flag = canceller.SecondsSinceSet();
  ASSERT_FALSE(got.ok());
  ExpectCancelledNamingTheUrl(got.status(), *server);
  EXPECT_LT(after_flag, kPromptSeconds);
  EXPECT_EQ(server->requests().size(), 1u);
  EXPECT_LT(server->body_bytes_sent(), size);
}

}  // namespace
}  // namespace anisoscope::transfer::testing
