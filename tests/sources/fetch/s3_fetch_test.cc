// StepFetcher against s3_server.py (s3rver from npm behind a SigV4-checking, fault-injecting
// proxy): a step folder under a prefix lands in the cache's s3--BUCKET layout and is read
// again with no request; a cut is resumed and a wrong sha256 stores nothing, as on the Hub.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sources/fetch/step_fetcher.h"
#include "tests/sources/fetch/fetch_test_util.h"

namespace anisoscope::fetch::testing {
namespace {

constexpr char kBucket[] = "ckpt";
constexpr char kPrefix[] = "runs/a/";

void WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

class S3FetchTest : public ::testing::Test {
 protected:
  // One server for the suite (s3rver takes about a second to start).
  static void SetUpTestSuite() {
    problem_ = new std::string(PrerequisiteMissing(/*s3=*/true));
    if (!problem_->empty()) return;
    fixtures_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                          ("anisoscope_s3_fetch_" + std::to_string(getpid())));
    for (const char* step : {"step100", "step200", "step300"}) {
      WriteFile(*fixtures_ / step / "config.json", "{\"step\": \"" + std::string(step) + "\"}\n");
      WriteFile(*fixtures_ / step / "model.safetensors", Bytes(step, 2 * kMiB));
    }
    absl::StatusOr<std::unique_ptr<ServerProcess>> s3 =
        ServerProcess::Start("s3_server.py",
                             {"--bucket", kBucket, "--fixtures", fixtures_->string(), "--prefix",
                              kPrefix, "--port", "0"},
                             4, /*graceful=*/true);
    if (!s3.ok()) {
      *problem_ = std::string(s3.status().message());
      return;
    }
    s3_ = s3->release();
  }
  static void TearDownTestSuite() {
    delete s3_;
    s3_ = nullptr;
    if (fixtures_ != nullptr) std::filesystem::remove_all(*fixtures_);
    delete fixtures_;
    fixtures_ = nullptr;
    delete problem_;
    problem_ = nullptr;
  }

  void SetUp() override {
    if (s3_ == nullptr) {
      if (InCi()) FAIL() << "no S3 test server: " << *problem_ << " (required in CI)";
      GTEST_SKIP() << "no S3 test server: " << *problem_;
    }
    s3_->Control("DELETE", "/_control").IgnoreError();
    transfer::TransferOptions options;
    options.max_attempts = 4;
    options.initial_backoff = absl::Milliseconds(2);
    options.max_backoff = absl::Milliseconds(20);
    options.stall_timeout = absl::Seconds(2);
    transfer::Credentials credentials;
    credentials.endpoint = s3_->url();
    credentials.aws = transfer::AwsSigV4Keys{"S3RVER", "S3RVER"};
    absl::StatusOr<std::unique_ptr<transfer::HttpClient>> client =
        transfer::HttpClient::Create(options, credentials);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    cache::SourceCacheOptions cache_options;
    cache_options.dir = dir_.path() / "cache";
    cache_options.max_bytes = 64 * kMiB;
    absl::StatusOr<std::unique_ptr<cache::SourceCache>> cache =
        cache::SourceCache::Create(cache_options);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
    fetcher_ = std::make_unique<StepFetcher>(cache_.get(), client_.get());
  }

  // The step folder `step` as a listing gives it: ETags from a signed HEAD, sha256 here.
  FetchStep MakeStep(const std::string& step) {
    const std::string step_prefix = std::string(kPrefix) + step + "/";
    FetchStep out;
    out.cache_step.repo = cache::S3BucketRepo(kBucket).value();
    out.cache_step.snapshot = cache::S3SnapshotName(step_prefix);
    for (const std::string name : {"config.json", "model.safetensors"}) {
      const std::string url = absl::StrCat(s3_->url(), "/", kBucket, "/", step_prefix, name);
      transfer::GetRequest head;
      head.url = url;
      head.head = true;
      absl::StatusOr<transfer::HttpResponse> answer = client_->Get(head);
      EXPECT_TRUE(answer.ok()) << answer.status();
      const std::filesystem::path path = *fixtures_ / step / name;
      const std::string etag =
          answer.ok() ? cache::NormalizeEtag(answer->headers.Get("ETag").value_or("")) : "";
      out.cache_step.files.push_back(cache::StepFile{name, etag, std::filesystem::file_size(path)});
      out.files.push_back(FetchFile{url, FileSha256(path)});
    }
    return out;
  }

  std::filesystem::path cache_dir() const { return dir_.path() / "cache"; }

  static std::string* problem_;
  static std::filesystem::path* fixtures_;
  static ServerProcess* s3_;
  TestTempDir dir_;
  std::unique_ptr<transfer::HttpClient> client_;
  std::unique_ptr<cache::SourceCache> cache_;
  std::unique_ptr<StepFetcher> fetcher_;
};

std::string* S3FetchTest::problem_ = nullptr;
std::filesystem::path* S3FetchTest::fixtures_ = nullptr;
ServerProcess* S3FetchTest::s3_ = nullptr;

TEST_F(S3FetchTest, StepFolderLandsInTheBucketLayoutAndIsReadAgainWithNoRequest) {
  const FetchStep step = MakeStep("step100");
  absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->folder,
            cache_dir() / "s3--ckpt" / "snapshots" / cache::S3SnapshotName("runs/a/step100/"));
  EXPECT_EQ(ReadAll(fetched->folder / "model.safetensors"), Bytes("step100", 2 * kMiB));
  EXPECT_EQ(ReadAll(fetched->folder / "config.json"), "{\"step\": \"step100\"}\n");
  { const FetchedStep dropped = *std::move(fetched); }

  s3_->ResetStats();
  absl::StatusOr<FetchedStep> again = fetcher_->Fetch(step);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->stats.cache_hit);
  EXPECT_EQ(again->stats.bytes_fetched, 0);
  const std::string stats = s3_->Stats();
  EXPECT_FALSE(Contains(stats, "/ckpt/runs/a/step100")) << stats;
}

TEST_F(S3FetchTest, CutMidObjectIsResumedByRange) {
  const FetchStep step = MakeStep("step200");
  ASSERT_TRUE(s3_->AddFault(R"({"kind": "cut", "after_bytes": 524288, "method": "GET",
                                "match": "/ckpt/runs/a/step200/model.safetensors"})")
                  .ok());
  absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(ReadAll(fetched->folder / "model.safetensors"), Bytes("step200", 2 * kMiB));
  EXPECT_GE(fetched->stats.retries, 1);
}

TEST_F(S3FetchTest, WrongSha256FailsNamingTheObjectAndStoresNothing) {
  FetchStep step = MakeStep("step300");
  std::swap(step.cache_step.files[0], step.cache_step.files[1]);  // the weights first
  std::swap(step.files[0], step.files[1]);
  ASSERT_TRUE(s3_->AddFault(R"({"kind": "corrupt", "offset": 99, "method": "GET", "times": -1,
                                "match": "/ckpt/runs/a/step300/model.safetensors"})")
                  .ok());
  const absl::StatusOr<FetchedStep> fetched = fetcher_->Fetch(step);
  ASSERT_FALSE(fetched.ok());
  const std::string message(fetched.status().message());
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kDataLoss) << message;
  EXPECT_TRUE(Contains(message, "s3://ckpt")) << message;
  EXPECT_TRUE(Contains(message, "'model.safetensors'")) << message;
  EXPECT_EQ(BlobBytes(cache_dir()), 0u);
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
  EXPECT_EQ(Records(cache_dir(), "pins"), 0);
  EXPECT_EQ(Records(cache_dir(), "reservations"), 0);
}

}  // namespace
}  // namespace anisoscope::fetch::testing
