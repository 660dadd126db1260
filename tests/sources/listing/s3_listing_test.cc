// The S3 listing against s3_server.py (s3rver behind a SigV4-checking proxy): step folders
// under a prefix, pagination by continuation-token, duplicates by ETag, wrong keys.
#include "sources/listing/s3_listing.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/sources/listing/listing_test_util.h"

namespace anisoscope::listing {
namespace {

namespace fs = std::filesystem;
using testing::ServerProcess;
using testing::TempDir;
using testing::TestClient;
using testing::WriteFile;

constexpr char kBucket[] = "listing-test";

transfer::Credentials S3Keys(const std::string& url, const std::string& secret = "S3RVER") {
  transfer::AwsSigV4Keys keys;
  keys.access_key_id = "S3RVER";
  keys.secret_access_key = secret;
  keys.region = "us-east-1";
  transfer::Credentials credentials;
  credentials.endpoint = url;
  credentials.aws = keys;
  return credentials;
}

class S3ListingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string missing = testing::PrerequisiteMissing(/*s3=*/true);
    if (!missing.empty()) {
      skip_reason_ = new std::string(missing);
      return;
    }
    fixtures_ = new TempDir();
    const fs::path run = fixtures_->path() / "runs" / "a";
    for (const auto& [step, weights] : std::vector<std::pair<std::string, std::string>>{
             {"step100", "w100"}, {"step200", "w200"}, {"step300", "w100"}}) {
      WriteFile(run / step / "config.json", R"({"model_type": "bert"})");
      WriteFile(run / step / "model.safetensors", weights);
      WriteFile(run / step / "optimizer.pt", "adam");
    }
    WriteFile(run / "step400" / "config.json", "{}");  // its weights never arrived
    WriteFile(run / "notes" / "readme.txt", "notes");
    WriteFile(run / "top.txt", "a file beside the folders");
    WriteFile(fixtures_->path() / "runs" / "b" / "step1" / "model.safetensors", "other run");
    auto server = testing::StartS3(kBucket, fixtures_->path());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }

  static void TearDownTestSuite() {
    delete server_;
    delete fixtures_;
    delete skip_reason_;
    server_ = nullptr;
    fixtures_ = nullptr;
    skip_reason_ = nullptr;
  }

  void SetUp() override {
    if (skip_reason_ == nullptr) return;
    if (testing::InCi()) FAIL() << *skip_reason_ << " (required in CI)";
    GTEST_SKIP() << *skip_reason_;
  }

  static S3ListingOptions Options(int max_keys) {
    S3ListingOptions options;
    options.endpoint = server_->url();
    options.max_keys = max_keys;
    return options;
  }

  static std::string* skip_reason_;
  static TempDir* fixtures_;
  static ServerProcess* server_;
};

std::string* S3ListingTest::skip_reason_ = nullptr;
TempDir* S3ListingTest::fixtures_ = nullptr;
ServerProcess* S3ListingTest::server_ = nullptr;

TEST_F(S3ListingTest, StepFoldersUnderThePrefixAreSteps) {
  auto client = TestClient(S3Keys(server_->url()));
  absl::StatusOr<S3Location> location = ParseS3Url(absl::StrCat("s3://", kBucket, "/runs/a/"));
  ASSERT_TRUE(location.ok()) << location.status();
  absl::StatusOr<SourceListing> listing = ListS3Prefix(*client, *location, Options(1000));
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->steps.size(), 3u);
  EXPECT_EQ(listing->steps[0].name, "step100");
  EXPECT_EQ(listing->steps[0].step, 100);
  EXPECT_EQ(listing->steps[0].repo, kBucket);
  EXPECT_EQ(listing->steps[0].revision, "runs/a/step100/");
  EXPECT_TRUE(listing->steps[0].commit.empty());
  ASSERT_EQ(listing->steps[0].files.size(), 2u);  // optimizer.pt is skipped
  const RemoteFile& weights = listing->steps[0].files[1];
  EXPECT_EQ(weights.path, "model.safetensors");
  EXPECT_EQ(weights.size, 4u);
  EXPECT_EQ(weights.etag.size(), 32u);  // a single-part upload's MD5
  EXPECT_EQ(weights.url,
            absl::StrCat(server_->url(), "/", kBucket, "/runs/a/step100/model.safetensors"));
  EXPECT_EQ(listing->without_step, std::vector<std::string>{"notes"});
  ASSERT_EQ(listing->problems.size(), 1u);
  EXPECT_EQ(listing->problems[0].name, "step400");
  EXPECT_TRUE(absl::StrContains(listing->problems[0].reason, "no weight file"));
  EXPECT_TRUE(absl::StrContains(listing->problems[0].reason, kBucket));
}

TEST_F(S3ListingTest, SmallPagesGiveTheSameListing) {
  auto client = TestClient(S3Keys(server_->url()));
  const S3Location location{kBucket, "runs/a/"};
  absl::StatusOr<SourceListing> whole = ListS3Prefix(*client, location, Options(1000));
  absl::StatusOr<SourceListing> paged = ListS3Prefix(*client, location, Options(1));
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(paged.ok()) << paged.status();
  ASSERT_EQ(paged->steps.size(), whole->steps.size());
  for (size_t i = 0; i < whole->steps.size(); ++i) {
    ASSERT_EQ(paged->steps[i].files.size(), whole->steps[i].files.size());
    for (size_t j = 0; j < whole->steps[i].files.size(); ++j) {
      EXPECT_EQ(paged->steps[i].files[j].etag, whole->steps[i].files[j].etag);
    }
  }
  EXPECT_EQ(paged->without_step, whole->without_step);
  // A page per object of each folder at least (s3rver may answer the folders in one page).
  EXPECT_GE(paged->counters.pages, whole->counters.pages + 6);
}

TEST_F(S3ListingTest, IdenticalWeightsAreDuplicates) {
  auto client = TestClient(S3Keys(server_->url()));
  absl::StatusOr<SourceListing> listing =
      ListS3Prefix(*client, {kBucket, "runs/a/"}, Options(1000));
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->duplicates.size(), 1u);
  EXPECT_EQ(listing->duplicates[0].names, (std::vector<std::string>{"step100", "step300"}));

  // No object was fetched: only the bucket's listings.
  absl::StatusOr<nlohmann::json> stats = testing::ServerStats(server_->url());
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const auto& [listener, paths] : stats->items()) {
    for (const auto& [path, counters] : paths.items()) {
      EXPECT_FALSE(absl::StrContains(path, "model.safetensors")) << listener << " " << path;
    }
  }
}

TEST_F(S3ListingTest, WholeListingBoundsAreErrorsNamingThePrefixAndTheBound) {
  auto client = TestClient(S3Keys(server_->url()));
  const S3Location location{kBucket, "runs/a/"};
  S3ListingOptions options = Options(1000);
  options.bounds.max_steps = 3;  // four step folders
  absl::StatusOr<SourceListing> steps = ListS3Prefix(*client, location, options);
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(steps.status().message(), "runs/a/")) << steps.status();
  EXPECT_TRUE(absl::StrContains(steps.status().message(), "max_steps")) << steps.status();

  options.bounds = {};
  options.bounds.max_total_files = 5;  // three usable steps of two files
  absl::StatusOr<SourceListing> files = ListS3Prefix(*client, location, options);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(files.status().message(), kBucket)) << files.status();
  EXPECT_TRUE(absl::StrContains(files.status().message(), "max_total_files")) << files.status();
}

TEST_F(S3ListingTest, KnownStepsAreNotListedAgain) {
  auto client = TestClient(S3Keys(server_->url()));
  S3ListingOptions options = Options(1000);
  options.skip_steps = {100, 300};
  absl::StatusOr<SourceListing> listing = ListS3Prefix(*client, {kBucket, "runs/a/"}, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->steps.size(), 1u);
  EXPECT_NE(listing->steps[0].step, 100);
  EXPECT_NE(listing->steps[0].step, 300);
  ASSERT_EQ(listing->problems.size(), 1u);  // step400, still not usable
  EXPECT_EQ(listing->counters.requests, 3);  // the prefix and two folders
}

TEST_F(S3ListingTest, AWrongSecretIsRefusedNamingTheBucket) {
  auto client = TestClient(S3Keys(server_->url(), "not-the-secret"));
  absl::StatusOr<SourceListing> listing =
      ListS3Prefix(*client, {kBucket, "runs/a/"}, Options(1000));
  ASSERT_EQ(listing.status().code(), absl::StatusCode::kPermissionDenied) << listing.status();
  EXPECT_TRUE(absl::StrContains(listing.status().message(), kBucket));
  EXPECT_FALSE(absl::StrContains(listing.status().message(), "not-the-secret"));
}

}  // namespace
}  // namespace anisoscope::listing
