// The Hub listings against hub_server.py: Pythia-style branches, pagination, narrowing,
// duplicates, hostile names, gated / private / missing repos, a repo per step, and the
// 154-branch audit (a benchmark figure, printed).
#include "sources/listing/hub_listing.h"

#include <chrono>
#include <cstdio>
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
using testing::AddFault;
using testing::ServerProcess;
using testing::ServerStats;
using testing::TempDir;
using testing::TestClient;
using testing::WriteFile;

constexpr char kPythia[] = "EleutherAI/pythia-tiny";

// A branch folder as a Pythia branch holds it, plus files a listing must skip.
void WriteBranch(const fs::path& dir, const std::string& weights) {
  WriteFile(dir / "config.json", R"({"model_type": "gpt_neox"})");
  WriteFile(dir / "tokenizer.json", R"({"version": "1.0"})");
  WriteFile(dir / "model.safetensors", weights);
  WriteFile(dir / "flax_model.msgpack", "flax");
  WriteFile(dir / "optimizer.pt", "adam");
  WriteFile(dir / "README.md", "# readme");
  WriteFile(dir / "docs" / "notes.txt", "notes");
}

std::vector<std::string> Names(const SourceListing& listing) {
  std::vector<std::string> names;
  for (const RemoteStep& step : listing.steps) names.push_back(step.name);
  return names;
}

class HubListingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string missing = testing::PrerequisiteMissing(/*s3=*/false);
    if (!missing.empty()) {
      skip_reason_ = new std::string(missing);
      return;
    }
    root_ = new TempDir();
    const fs::path root = root_->path();
    for (const auto& [branch, weights] :
         std::vector<std::pair<std::string, std::string>>{{"main", "w3000"},
                                                          {"step0", "w0"},
                                                          {"step1000", "w1000"},
                                                          {"step2000", "w1000"},
                                                          {"step3000", "w3000"}}) {
      WriteBranch(root / kPythia / branch, weights);
    }
    for (const char* repo : {"org/gated", "org/private", "org/hostile"}) {
      for (const char* branch : {"step1", "step2", "step3"}) {
        WriteBranch(root / repo / branch, absl::StrCat(repo, branch));
      }
    }
    WriteBranch(root / "org/conflict/step10", "a");
    WriteBranch(root / "org/conflict/checkpoint-10", "b");
    for (const char* repo :
         {"multiberts-seed_0-step_20k", "multiberts-seed_0-step_40k", "multiberts-seed_0-step_100k",
          "multiberts-seed_1-step_20k", "multiberts-seed_0"}) {
      WriteBranch(root / "google" / repo / "main", repo);
    }
    const std::vector<std::string> access = {"--gated", "org/gated=hf_reader", "--private",
                                             "org/private=hf_reader"};
    auto hub = testing::StartHub(root, access);
    std::vector<std::string> paged = access;
    paged.insert(paged.end(), {"--page-size", "2"});
    auto paged_hub = testing::StartHub(root, paged);
    ASSERT_TRUE(hub.ok()) << hub.status();
    ASSERT_TRUE(paged_hub.ok()) << paged_hub.status();
    hub_ = hub->release();
    paged_hub_ = paged_hub->release();
  }

  static void TearDownTestSuite() {
    delete hub_;
    delete paged_hub_;
    delete root_;
    delete skip_reason_;
    hub_ = paged_hub_ = nullptr;
    root_ = nullptr;
    skip_reason_ = nullptr;
  }

  void SetUp() override {
    if (skip_reason_ == nullptr) return;
    if (testing::InCi()) FAIL() << *skip_reason_ << " (required in CI)";
    GTEST_SKIP() << *skip_reason_;
  }

  static HubListingOptions Options(const ServerProcess* server) {
    HubListingOptions options;
    options.endpoint = server->url();
    return options;
  }

  static std::string* skip_reason_;
  static TempDir* root_;
  static ServerProcess* hub_;
  static ServerProcess* paged_hub_;
};

std::string* HubListingTest::skip_reason_ = nullptr;
TempDir* HubListingTest::root_ = nullptr;
ServerProcess* HubListingTest::hub_ = nullptr;
ServerProcess* HubListingTest::paged_hub_ = nullptr;

TEST_F(HubListingTest, PythiaBranchesAreStepsAndMainCarriesNone) {
  auto client = TestClient();
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, kPythia, Options(hub_));
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(Names(*listing),
            (std::vector<std::string>{"step0", "step1000", "step2000", "step3000"}));
  EXPECT_EQ(listing->steps[1].step, 1000);
  EXPECT_EQ(listing->without_step, std::vector<std::string>{"main"});
  EXPECT_TRUE(listing->problems.empty());
  const RemoteStep& step = listing->steps[1];
  EXPECT_EQ(step.repo, kPythia);
  EXPECT_EQ(step.revision, "step1000");
  ASSERT_EQ(step.commit.size(), 40u);
  // Only what a checkpoint needs: no msgpack, optimizer state, README, .gitattributes or
  // files in subfolders.
  ASSERT_EQ(step.files.size(), 3u);
  EXPECT_EQ(step.files[0].path, "config.json");
  EXPECT_TRUE(step.files[0].sha256.empty());
  EXPECT_EQ(step.files[0].etag.size(), 40u);  // the git blob oid
  EXPECT_EQ(step.files[1].path, "model.safetensors");
  EXPECT_EQ(step.files[1].size, 5u);
  EXPECT_EQ(step.files[1].sha256.size(), 64u);
  EXPECT_EQ(step.files[1].etag, step.files[1].sha256);
  EXPECT_EQ(step.files[1].url, absl::StrCat(hub_->url(), "/", kPythia, "/resolve/", step.commit,
                                            "/model.safetensors"));
  EXPECT_EQ(step.files[2].path, "tokenizer.json");
  EXPECT_GE(listing->counters.requests, 5);  // the refs and a tree per step

  // The URL serves the file (config.json: not a weight byte).
  transfer::GetRequest get;
  get.url = step.files[0].url;
  absl::StatusOr<transfer::HttpResponse> config = client->Get(get);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->body.size(), step.files[0].size);
}

TEST_F(HubListingTest, DuplicateStepsAreFoundFromTheListing) {
  auto client = TestClient();
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, kPythia, Options(hub_));
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->duplicates.size(), 1u);
  EXPECT_EQ(listing->duplicates[0].names, (std::vector<std::string>{"step1000", "step2000"}));
}

TEST_F(HubListingTest, TreePagesAreFollowedByLink) {
  auto client = TestClient();
  absl::StatusOr<SourceListing> paged = ListHubBranches(*client, kPythia, Options(paged_hub_));
  absl::StatusOr<SourceListing> whole = ListHubBranches(*client, kPythia, Options(hub_));
  ASSERT_TRUE(paged.ok()) << paged.status();
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(paged->steps.size(), whole->steps.size());
  for (size_t i = 0; i < paged->steps.size(); ++i) {
    ASSERT_EQ(paged->steps[i].files.size(), whole->steps[i].files.size());
    for (size_t j = 0; j < paged->steps[i].files.size(); ++j) {
      EXPECT_EQ(paged->steps[i].files[j].etag, whole->steps[i].files[j].etag);
    }
  }
  // 9 entries a branch (8 files and a folder), 2 a page: 5 pages per step, 4 steps, refs.
  EXPECT_EQ(paged->counters.pages, 1 + 4 * 5);
  EXPECT_EQ(whole->counters.pages, 1 + 4);
}

TEST_F(HubListingTest, PageBoundIsAnErrorNamingTheRepo) {
  auto client = TestClient();
  HubListingOptions options = Options(paged_hub_);
  options.bounds.max_pages = 2;
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, kPythia, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->problems.size(), 4u);
  EXPECT_TRUE(listing->steps.empty());
  EXPECT_TRUE(absl::StrContains(listing->problems[0].reason, kPythia));
  EXPECT_TRUE(absl::StrContains(listing->problems[0].reason, "max_pages"));
}

TEST_F(HubListingTest, RevisionListAndGlobNarrow) {
  auto client = TestClient();
  HubListingOptions options = Options(hub_);
  options.selection.names = {"step3000", "step1000", "step9", "main"};
  absl::StatusOr<SourceListing> listed = ListHubBranches(*client, kPythia, options);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(Names(*listed), (std::vector<std::string>{"step1000", "step3000"}));
  EXPECT_EQ(listed->without_step, std::vector<std::string>{"main"});
  ASSERT_EQ(listed->problems.size(), 1u);
  EXPECT_EQ(listed->problems[0].name, "step9");
  EXPECT_EQ(listed->problems[0].step, 9);

  options.selection = {};
  options.selection.glob = "step[12]*";
  absl::StatusOr<SourceListing> globbed = ListHubBranches(*client, kPythia, options);
  ASSERT_TRUE(globbed.ok()) << globbed.status();
  EXPECT_EQ(Names(*globbed), (std::vector<std::string>{"step1000", "step2000"}));
  EXPECT_TRUE(globbed->without_step.empty());
}

TEST_F(HubListingTest, TwoBranchesWithOneStepAreAnErrorNamingBoth) {
  auto client = TestClient();
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, "org/conflict", Options(hub_));
  ASSERT_EQ(listing.status().code(), absl::StatusCode::kInvalidArgument) << listing.status();
  EXPECT_TRUE(absl::StrContains(listing.status().message(), "step10"));
  EXPECT_TRUE(absl::StrContains(listing.status().message(), "checkpoint-10"));
  EXPECT_TRUE(absl::StrContains(listing.status().message(), "org/conflict"));
}

TEST_F(HubListingTest, HostileNameMakesOnlyItsStepAProblem) {
  auto client = TestClient();
  transfer::GetRequest refs;
  refs.url = absl::StrCat(hub_->url(), "/api/models/org/hostile/refs");
  absl::StatusOr<transfer::HttpResponse> answer = client->Get(refs);
  ASSERT_TRUE(answer.ok()) << answer.status();
  std::string commit;
  const nlohmann::json refs_json = nlohmann::json::parse(answer->body);
  for (const auto& branch : refs_json.at("branches")) {
    if (branch.at("name") == "step2") commit = branch.at("targetCommit").get<std::string>();
  }
  ASSERT_EQ(commit.size(), 40u);
  ASSERT_TRUE(
      AddFault(hub_->url(), {{"kind", "listing_extra"},
                             {"names", {"../../evil.safetensors"}},
                             {"match", absl::StrCat("/api/models/org/hostile/tree/", commit)}})
          .ok());
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, "org/hostile", Options(hub_));
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(Names(*listing), (std::vector<std::string>{"step1", "step3"}));
  ASSERT_EQ(listing->problems.size(), 1u);
  EXPECT_EQ(listing->problems[0].name, "step2");
  EXPECT_EQ(listing->problems[0].step, 2);
  EXPECT_TRUE(absl::StrContains(listing->problems[0].reason, "org/hostile"));
  EXPECT_TRUE(absl::StrContains(listing->problems[0].reason, "evil"))
      << listing->problems[0].reason;
  EXPECT_FALSE(absl::StrContains(listing->problems[0].reason, "hostile\n"));
}

TEST_F(HubListingTest, GatedRepoListsAsOnTheHubAndPrivateNeedsTheToken) {
  auto anonymous = TestClient();
  // The Hub keeps a gated repo's listings public (only its files need the token).
  absl::StatusOr<SourceListing> gated = ListHubBranches(*anonymous, "org/gated", Options(hub_));
  ASSERT_TRUE(gated.ok()) << gated.status();
  EXPECT_EQ(gated->steps.size(), 3u);

  absl::StatusOr<SourceListing> refused = ListHubBranches(*anonymous, "org/private", Options(hub_));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "hub:org/private"));

  auto reader = TestClient({hub_->url(), "hf_reader", std::nullopt});
  absl::StatusOr<SourceListing> allowed = ListHubBranches(*reader, "org/private", Options(hub_));
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(Names(*allowed), (std::vector<std::string>{"step1", "step2", "step3"}));
  EXPECT_FALSE(absl::StrContains(refused.status().message(), "hf_reader"));
}

TEST_F(HubListingTest, MissingRepoIsAClearError) {
  auto client = TestClient();
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, "org/nope", Options(hub_));
  ASSERT_FALSE(listing.ok());
  EXPECT_TRUE(absl::StrContains(listing.status().message(), "hub:org/nope"));
  EXPECT_TRUE(absl::StrContains(listing.status().message(), "RepoNotFound")) << listing.status();

  EXPECT_EQ(ListHubBranches(*client, "../etc", Options(hub_)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(HubListingTest, RepoPerStepSuiteBySearchAndByValues) {
  auto client = TestClient();
  HubSuiteOptions options;
  options.endpoint = hub_->url();
  absl::StatusOr<SourceListing> found =
      ListHubSuite(*client, "google/multiberts-seed_0-step_{}k", options);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(Names(*found), (std::vector<std::string>{"google/multiberts-seed_0-step_20k",
                                                     "google/multiberts-seed_0-step_40k",
                                                     "google/multiberts-seed_0-step_100k"}));
  EXPECT_EQ(found->steps[0].step, 20000);
  EXPECT_EQ(found->steps[2].step, 100000);
  EXPECT_EQ(found->steps[0].revision, "main");
  EXPECT_EQ(found->steps[0].commit.size(), 40u);
  EXPECT_TRUE(found->problems.empty());

  options.values = {"20", "60"};
  absl::StatusOr<SourceListing> given =
      ListHubSuite(*client, "google/multiberts-seed_0-step_{}k", options);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(Names(*given), std::vector<std::string>{"google/multiberts-seed_0-step_20k"});
  ASSERT_EQ(given->problems.size(), 1u);
  EXPECT_EQ(given->problems[0].name, "google/multiberts-seed_0-step_60k");
  EXPECT_EQ(given->problems[0].step, 60000);

  EXPECT_EQ(ListHubSuite(*client, "google/multiberts", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(HubListingTest, WholeListingBoundsAreErrorsNamingTheRepoAndTheBound) {
  auto client = TestClient();
  HubListingOptions options = Options(hub_);
  options.bounds.max_steps = 3;  // four step branches
  absl::StatusOr<SourceListing> steps = ListHubBranches(*client, kPythia, options);
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(steps.status().message(), kPythia)) << steps.status();
  EXPECT_TRUE(absl::StrContains(steps.status().message(), "max_steps")) << steps.status();

  options.bounds = {};
  options.bounds.max_total_files = 11;  // 4 steps of 3 files
  absl::StatusOr<SourceListing> files = ListHubBranches(*client, kPythia, options);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(files.status().message(), kPythia)) << files.status();
  EXPECT_TRUE(absl::StrContains(files.status().message(), "max_total_files")) << files.status();
  options.bounds.max_total_files = 12;
  EXPECT_TRUE(ListHubBranches(*client, kPythia, options).ok());

  HubSuiteOptions suite;
  suite.endpoint = hub_->url();
  suite.bounds.max_steps = 2;  // three repos
  absl::StatusOr<SourceListing> repos =
      ListHubSuite(*client, "google/multiberts-seed_0-step_{}k", suite);
  EXPECT_EQ(repos.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(repos.status().message(), "multiberts")) << repos.status();
  EXPECT_TRUE(absl::StrContains(repos.status().message(), "max_steps")) << repos.status();
}

TEST_F(HubListingTest, KnownStepsAreNotListedAgain) {
  auto client = TestClient();
  HubListingOptions options = Options(hub_);
  options.skip_steps = {0, 1000, 3000};
  absl::StatusOr<SourceListing> listing = ListHubBranches(*client, kPythia, options);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(Names(*listing), std::vector<std::string>{"step2000"});
  EXPECT_TRUE(listing->problems.empty());
  EXPECT_EQ(listing->counters.requests, 2);  // the refs and one tree

  HubSuiteOptions suite;
  suite.endpoint = hub_->url();
  suite.skip_steps = {20000, 100000};
  absl::StatusOr<SourceListing> repos =
      ListHubSuite(*client, "google/multiberts-seed_0-step_{}k", suite);
  ASSERT_TRUE(repos.ok()) << repos.status();
  EXPECT_EQ(Names(*repos), std::vector<std::string>{"google/multiberts-seed_0-step_40k"});
  EXPECT_EQ(repos->counters.requests, 2);  // the search and one tree
}

TEST_F(HubListingTest, SuiteGlobExcludesReposBeforeTheyAreListed) {
  auto client = TestClient();
  HubSuiteOptions options;
  options.endpoint = hub_->url();
  options.glob = "*_[24]0k";
  absl::StatusOr<SourceListing> found =
      ListHubSuite(*client, "google/multiberts-seed_0-step_{}k", options);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(Names(*found), (std::vector<std::string>{"google/multiberts-seed_0-step_20k",
                                                     "google/multiberts-seed_0-step_40k"}));
  EXPECT_EQ(found->counters.requests, 3);  // the search and two trees

  // A value the glob excludes is neither listed nor a problem.
  options.values = {"20", "60"};
  absl::StatusOr<SourceListing> given =
      ListHubSuite(*client, "google/multiberts-seed_0-step_{}k", options);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(Names(*given), std::vector<std::string>{"google/multiberts-seed_0-step_20k"});
  EXPECT_TRUE(given->problems.empty());
  EXPECT_TRUE(given->without_step.empty());
}

// Issue 38's goal: a 154-branch repo listed and audited (< 5 s), no weight byte read.
TEST_F(HubListingTest, A154BranchRepoIsAuditedQuicklyWithoutWeightBytes) {
  TempDir root;
  std::vector<int64_t> steps = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  for (int64_t step = 1000; step <= 143000; step += 1000) steps.push_back(step);
  ASSERT_EQ(steps.size(), 154u);
  const fs::path repo = root.path() / "EleutherAI/pythia-2.8b";
  WriteBranch(repo / "main", "final");
  for (const int64_t step : steps) {
    // As pythia #205 found: the later half of the branches hold the final weights.
    WriteBranch(repo / absl::StrCat("step", step),
                step >= 72000 ? std::string("final") : absl::StrCat("w", step));
  }
  auto hub = testing::StartHub(root.path(), {});
  ASSERT_TRUE(hub.ok()) << hub.status();
  auto client = TestClient();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SourceListing> listing =
      ListHubBranches(*client, "EleutherAI/pythia-2.8b", Options(hub->get()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(listing.ok()) << listing.status();
  std::printf("[ benchmark ] 154-branch audit: %.2f s, %lld requests, %lld bytes\n", seconds,
              static_cast<long long>(listing->counters.requests),
              static_cast<long long>(listing->counters.transfer.bytes_fetched));
  EXPECT_LT(seconds, 30.0);
  EXPECT_EQ(listing->steps.size(), 154u);
  ASSERT_EQ(listing->duplicates.size(), 1u);
  EXPECT_EQ(listing->duplicates[0].names.size(), 72u);  // step72000 ... step143000
  EXPECT_EQ(listing->counters.requests, 155);

  absl::StatusOr<nlohmann::json> stats = ServerStats((*hub)->url());
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const char* listener : {"hub", "cdn"}) {
    if (!stats->contains(listener)) continue;
    for (const auto& [path, counters] : (*stats)[listener].items()) {
      EXPECT_FALSE(absl::StrContains(path, "/resolve/")) << path;
      EXPECT_FALSE(absl::StrContains(path, "/repos/")) << path;
    }
  }
}

}  // namespace
}  // namespace anisoscope::listing
