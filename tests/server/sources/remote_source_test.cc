// Jobs from where a series lives (issue 38), against the local Hub (hub_server.py): a submit
// lists the repo on the server and stores a checkpoint per step with its RemoteCheckpoint (a
// listed duplicate skipped with dedupe, never leased), the lease carries it and the next one,
// the stored step records its origin, a restarted server keeps the descriptors, a source
// outside --allow-source or the namespace's sources is refused; and the audit of a Hub repo
// and of a folder. The test plays a remote worker (no embedded workers).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/jobs/source_audit.h"
#include "server/jobs/source_steps.h"
#include "sources/endpoints/source_endpoints.h"
#include "storage/metrics_store.h"
#include "tests/server/server_test_util.h"
#include "tests/sources/servers/server_process.h"
#include "worker/metrics_upload.h"

namespace anisoscope::server::testing {
namespace {

using source_servers::ServerProcess;
using ::testing::HasSubstr;

constexpr char kRepo[] = "EleutherAI/pythia-tiny";

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

// A branch as Pythia's hold one: config, tokenizer, weights (and a file a listing skips).
void WriteBranch(const fs::path& dir, const std::string& weights) {
  WriteFile(dir / "config.json", R"({"model_type": "gpt_neox"})");
  WriteFile(dir / "tokenizer.json", R"({"version": "1.0"})");
  WriteFile(dir / "model.safetensors", weights);
  WriteFile(dir / "optimizer.pt", "adam");
}

class RemoteSourceTest : public ServerFixture {
 protected:
  static void SetUpTestSuite() {
    const std::string missing = source_servers::PrerequisiteMissing(/*s3=*/false);
    if (!missing.empty()) {
      skip_reason_ = new std::string(missing);
      return;
    }
    hub_root_ = new fs::path(fs::temp_directory_path() /
                             ("remote-source-hub-" + std::to_string(::getpid())));
    for (const auto& [branch, weights] :
         std::vector<std::pair<std::string, std::string>>{{"main", "w3000"},
                                                          {"step0", "w0"},
                                                          {"step1000", "w1000"},
                                                          {"step2000", "w1000"},
                                                          {"step3000", "w3000"}}) {
      WriteBranch(*hub_root_ / kRepo / branch, weights);
    }
    // A branch without weights: a step the listing cannot use.
    WriteFile(*hub_root_ / kRepo / "step4000" / "config.json", "{}");
    auto hub =
        ServerProcess::Start("hub_server.py", {"--root", hub_root_->string(), "--port", "0"}, 2,
                             /*graceful=*/true);
    ASSERT_TRUE(hub.ok()) << hub.status();
    hub_ = hub->release();
  }

  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
    if (hub_root_ != nullptr) {
      std::error_code ignored;
      fs::remove_all(*hub_root_, ignored);
    }
    delete hub_root_;
    hub_root_ = nullptr;
    delete skip_reason_;
    skip_reason_ = nullptr;
  }

  void SetUp() override {
    ServerFixture::SetUp();
    if (skip_reason_ != nullptr) {
      if (source_servers::InCi()) FAIL() << *skip_reason_ << " (required in CI)";
      GTEST_SKIP() << *skip_reason_;
    }
    // The server's Hub endpoint: its flags are unset here, so the environment names it.
    ::setenv("HF_ENDPOINT", hub_->url().c_str(), 1);
    allow_sources_ = {"hub:EleutherAI/*"};
    remote_follow_interval_seconds_ = 2;  // as the folders' --follow-interval here
  }

  pb::SubmitJobRequest HubRequest(const std::string& run, bool dedupe) const {
    pb::SubmitJobRequest request = DirRequest(run, root_);
    request.clear_checkpoints_dir();
    request.mutable_source()->set_hub(kRepo);
    request.set_dedupe(dedupe);
    return request;
  }

  std::optional<pb::WorkUnit> Lease(int wait_ms = 2000) {
    grpc::ClientContext context;
    pb::LeaseWorkRequest request;
    request.mutable_worker()->set_name("remote-1");
    request.set_wait_ms(wait_ms);
    pb::LeaseWorkResponse response;
    const grpc::Status status = workers_->LeaseWork(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!response.has_unit()) return std::nullopt;
    return response.unit();
  }

  grpc::Status Complete(const pb::WorkUnit& unit) {
    grpc::ClientContext context;
    pb::CompleteWorkRequest request;
    request.set_lease_id(unit.lease_id());
    request.mutable_probe()->set_id(FakeProbeId(probe_));
    request.mutable_probe()->set_num_samples(3);
    request.mutable_probe()->set_num_tokens(21);
    request.mutable_probe()->set_description("tokens probe.jsonl 3 samples");
    *request.mutable_metrics() = worker::ToUpload(FakeMetricsFor(unit.checkpoint_path()));
    pb::CompleteWorkResponse response;
    return workers_->CompleteWork(&context, request, &response);
  }

  static std::string* skip_reason_;
  static fs::path* hub_root_;
  static ServerProcess* hub_;
};

std::string* RemoteSourceTest::skip_reason_ = nullptr;
fs::path* RemoteSourceTest::hub_root_ = nullptr;
ServerProcess* RemoteSourceTest::hub_ = nullptr;

TEST_F(RemoteSourceTest, EachListedStepIsACheckpointCarryingItsRemoteDescriptor) {
  StartServer(/*workers=*/0);
  pb::Job job;
  const grpc::Status submitted = Submit(HubRequest("pythia", /*dedupe=*/true), &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  EXPECT_EQ(job.source().hub(), kRepo);
  ASSERT_EQ(job.checkpoints_size(), 5);  // step0..3000, and step4000 that has no weights
  EXPECT_EQ(job.checkpoints(0).path(), "hub:EleutherAI/pythia-tiny@step0");
  EXPECT_EQ(job.checkpoints(1).revision(), "step1000");
  EXPECT_EQ(job.checkpoints(1).commit().size(), 40u);
  // step2000 holds step1000's weights: skipped before any download.
  EXPECT_EQ(job.checkpoints(2).state(), pb::STEP_STATE_SKIPPED);
  EXPECT_EQ(job.checkpoints(2).duplicate_of(), 1000);
  EXPECT_THAT(job.checkpoints(2).error(), HasSubstr("step 1000"));
  EXPECT_EQ(job.checkpoints(3).state(), pb::STEP_STATE_PENDING);
  // step4000 is failed as its own checkpoint, with the listing's reason; the rest run.
  EXPECT_EQ(job.checkpoints(4).step(), 4000);
  EXPECT_EQ(job.checkpoints(4).state(), pb::STEP_STATE_FAILED);
  EXPECT_FALSE(job.checkpoints(4).error().empty());

  std::optional<pb::WorkUnit> first = Lease();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->step(), 0);
  EXPECT_EQ(first->remote().kind(), pb::SOURCE_KIND_HUB);
  EXPECT_EQ(first->remote().repo(), kRepo);
  EXPECT_EQ(first->remote().revision(), "step0");
  EXPECT_EQ(first->remote().commit().size(), 40u);
  bool weights = false;
  for (const pb::RemoteFile& file : first->remote().files()) {
    weights = weights || (file.path() == "model.safetensors" && file.sha256().size() == 64);
    EXPECT_NE(file.path(), "optimizer.pt");
  }
  EXPECT_TRUE(weights);
  EXPECT_EQ(first->next_remote().revision(), "step1000");  // read ahead
  EXPECT_TRUE(first->next_checkpoint_path().empty());
  EXPECT_GT(first->allowed_roots_size(), 0);

  // Stored with its origin.
  ASSERT_TRUE(Complete(*first).ok());
  grpc::ClientContext context;
  pb::ListRunsResponse runs;
  ASSERT_TRUE(queries_->ListRuns(&context, pb::ListRunsRequest(), &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  ASSERT_EQ(runs.runs(0).origins_size(), 1);
  EXPECT_EQ(runs.runs(0).origins(0).step(), 0);
  EXPECT_EQ(runs.runs(0).origins(0).source(), "hub:EleutherAI/pythia-tiny");
  EXPECT_EQ(runs.runs(0).origins(0).revision(), "step0");
  EXPECT_EQ(runs.runs(0).origins(0).commit(), first->remote().commit());

  // Leased in step order; the skipped and failed steps never are.
  std::optional<pb::WorkUnit> second = Lease();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->step(), 1000);
  EXPECT_EQ(second->next_remote().revision(), "step3000");
  std::optional<pb::WorkUnit> third = Lease();
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->step(), 3000);
  EXPECT_FALSE(third->has_next_remote());
  EXPECT_FALSE(Lease(200).has_value());
}

TEST_F(RemoteSourceTest, WithoutDedupeEveryListedStepRuns) {
  StartServer(/*workers=*/0);
  pb::SubmitJobRequest request = HubRequest("pythia", /*dedupe=*/false);
  request.mutable_source()->add_revisions("step1000");
  request.mutable_source()->add_revisions("step2000");
  pb::Job job;
  const grpc::Status submitted = Submit(request, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  ASSERT_EQ(job.checkpoints_size(), 2);
  EXPECT_EQ(job.checkpoints(1).state(), pb::STEP_STATE_PENDING);
}

TEST_F(RemoteSourceTest, ARestartedServerResumesWithTheRemoteDescriptors) {
  StartServer(/*workers=*/0);
  pb::Job job;
  const grpc::Status submitted = Submit(HubRequest("pythia", /*dedupe=*/true), &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  StopServer();
  StartServer(/*workers=*/0);
  std::optional<pb::WorkUnit> unit = Lease();
  ASSERT_TRUE(unit.has_value());
  EXPECT_EQ(unit->job_id(), job.id());
  EXPECT_EQ(unit->remote().repo(), kRepo);
  EXPECT_EQ(unit->remote().revision(), "step0");
  EXPECT_GT(unit->remote().files_size(), 0);
  pb::Job resumed;
  ASSERT_TRUE(GetJob(job.id(), &resumed).ok());
  EXPECT_EQ(resumed.source().hub(), kRepo);
  EXPECT_EQ(resumed.checkpoints(2).duplicate_of(), 1000);
  EXPECT_EQ(resumed.checkpoints(1).revision(), "step1000");  // loaded as stored
  EXPECT_EQ(resumed.checkpoints(1).commit().size(), 40u);
}

TEST_F(RemoteSourceTest, ASourceOutsideTheAllowListsIsRefusedNamingIt) {
  allow_sources_ = {"hub:google/*"};
  StartServer(/*workers=*/0);
  pb::Job job;
  const grpc::Status refused = Submit(HubRequest("pythia", false), &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("hub:EleutherAI/pythia-tiny"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--allow-source"));
  StopServer();

  // The server allows the org; the namespace narrows it to another repo.
  allow_sources_ = {"hub:EleutherAI/*"};
  {
    auto store = storage::MetricsStore::Open({db_.string()});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->SetNamespaceSources("default", {"hub:EleutherAI/pythia-14m"}).ok());
  }
  StartServer(/*workers=*/0);
  const grpc::Status narrowed = Submit(HubRequest("pythia", false), &job);
  EXPECT_EQ(narrowed.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(narrowed.error_message(), HasSubstr("namespace"));
}

TEST_F(RemoteSourceTest, ASourceWithNoStepIsInvalidNamingIt) {
  StartServer(/*workers=*/0);
  pb::SubmitJobRequest request = HubRequest("pythia", false);
  request.mutable_source()->set_glob("main*");
  pb::Job job;
  const grpc::Status empty = Submit(request, &job);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty.error_message(), HasSubstr("hub:EleutherAI/pythia-tiny"));
  request.set_checkpoints_dir(root_.string());
  EXPECT_EQ(Submit(request, &job).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RemoteSourceTest, AFollowedSourceAddsEachNewStepOnceItsWeightsAreListed) {
  const fs::path repo = *hub_root_ / "EleutherAI" / "pythia-growing";
  WriteBranch(repo / "step100", "a");
  StartServer(/*workers=*/0);
  pb::SubmitJobRequest request = HubRequest("growing", /*dedupe=*/false);
  request.mutable_source()->set_hub("EleutherAI/pythia-growing");
  request.set_follow(true);
  pb::Job job;
  const grpc::Status submitted = Submit(request, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  EXPECT_TRUE(job.follow());
  ASSERT_EQ(job.checkpoints_size(), 1);
  // A branch still being pushed (no weights yet) is left for a later poll, not failed.
  WriteFile(repo / "step200" / "config.json", "{}");
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the follower polls every 2 s
  ASSERT_TRUE(GetJob(job.id(), &job).ok());
  EXPECT_EQ(job.checkpoints_size(), 1);
  WriteFile(repo / "step200" / "model.safetensors", "b");
  for (int i = 0; i < 100 && job.checkpoints_size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(GetJob(job.id(), &job).ok());
  }
  ASSERT_EQ(job.checkpoints_size(), 2);
  EXPECT_EQ(job.checkpoints(1).path(), "hub:EleutherAI/pythia-growing@step200");
  EXPECT_EQ(job.checkpoints(1).revision(), "step200");
  EXPECT_EQ(job.checkpoints(1).state(), pb::STEP_STATE_PENDING);
  std::optional<pb::WorkUnit> first = Lease();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->next_remote().revision(), "step200");
  std::error_code ignored;
  fs::remove_all(repo, ignored);
}

// GET requests the test Hub counted per path whose path contains `part`.
std::map<std::string, int> HubRequests(const std::string& url, const std::string& part) {
  std::map<std::string, int> out;
  auto client = transfer::HttpClient::Create({});
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return out;
  transfer::GetRequest get;
  get.url = url + "/_stats";
  absl::StatusOr<transfer::HttpResponse> response = (*client)->Get(get);
  EXPECT_TRUE(response.ok()) << response.status();
  if (!response.ok()) return out;
  const nlohmann::json stats = nlohmann::json::parse(response->body);
  for (const auto& [listener, paths] : stats.items()) {
    for (const auto& [path, counters] : paths.items()) {
      if (path.find(part) != std::string::npos) out[path] += counters["requests"].get<int>();
    }
  }
  return out;
}

TEST_F(RemoteSourceTest, AFollowedSourceListsOnlyItsRefsAndNewStepsEachPoll) {
  const fs::path repo = *hub_root_ / "EleutherAI" / "pythia-polled";
  WriteBranch(repo / "step100", "a");
  StartServer(/*workers=*/0);
  pb::SubmitJobRequest request = HubRequest("polled", /*dedupe=*/false);
  request.mutable_source()->set_hub("EleutherAI/pythia-polled");
  request.set_follow(true);
  pb::Job job;
  const grpc::Status submitted = Submit(request, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));  // two polls at least
  const std::map<std::string, int> refs = HubRequests(hub_->url(), "pythia-polled/refs");
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_GE(refs.begin()->second, 3);  // the submit's and the polls'
  const std::map<std::string, int> trees = HubRequests(hub_->url(), "pythia-polled/tree/");
  ASSERT_EQ(trees.size(), 1u);
  EXPECT_EQ(trees.begin()->second, 1);  // the submit's alone: a known step is not listed again
  std::error_code ignored;
  fs::remove_all(repo, ignored);
}

TEST_F(RemoteSourceTest, AFollowedSourceIsPolledAtMostEveryThirtySecondsByDefault) {
  const fs::path repo = *hub_root_ / "EleutherAI" / "pythia-slow";
  WriteBranch(repo / "step100", "a");
  remote_follow_interval_seconds_.reset();  // CheckpointFollower::kRemoteFollowInterval
  StartServer(/*workers=*/0);
  pb::SubmitJobRequest request = HubRequest("slow", /*dedupe=*/false);
  request.mutable_source()->set_hub("EleutherAI/pythia-slow");
  request.set_follow(true);
  pb::Job job;
  const grpc::Status submitted = Submit(request, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  // The folders' --follow-interval is 2 s here: a remote source waits its 30 s (its first
  // poll comes at once, then none for 30 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  const std::map<std::string, int> refs = HubRequests(hub_->url(), "pythia-slow/refs");
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_LE(refs.begin()->second, 2);  // the submit's and at most one poll
  std::error_code ignored;
  fs::remove_all(repo, ignored);
}

TEST_F(RemoteSourceTest, AFollowedSourceRefusedNowEndsItsJobNamingWhy) {
  StartServer(/*workers=*/0);
  pb::SubmitJobRequest request = HubRequest("refused", /*dedupe=*/false);
  request.set_follow(true);
  pb::Job job;
  const grpc::Status submitted = Submit(request, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  // The namespace's sources narrow the server's to another repo while the job follows.
  {
    auto store = storage::MetricsStore::Open({db_.string()});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->SetNamespaceSources("default", {"hub:EleutherAI/pythia-14m"}).ok());
  }
  for (int i = 0; i < 100 && job.state() != pb::JOB_STATE_CANCELLED; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(GetJob(job.id(), &job).ok());
  }
  EXPECT_EQ(job.state(), pb::JOB_STATE_CANCELLED) << job.ShortDebugString();
  EXPECT_FALSE(Lease(200).has_value());  // nothing of it is leased
}

TEST_F(RemoteSourceTest, AResumedJobWhoseSourceIsRefusedNowFailsAtRestart) {
  StartServer(/*workers=*/0);
  pb::Job job;
  const grpc::Status submitted = Submit(HubRequest("revoked", /*dedupe=*/false), &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  StopServer();
  allow_sources_ = {"hub:google/*"};  // the operator removed the entry and restarted
  StartServer(/*workers=*/0);
  EXPECT_FALSE(Lease(200).has_value());  // no step of the revoked source is leased
  pb::Job resumed;
  ASSERT_TRUE(GetJob(job.id(), &resumed).ok());
  EXPECT_EQ(resumed.state(), pb::JOB_STATE_FAILED);
  EXPECT_THAT(resumed.error(), HasSubstr("hub:EleutherAI/pythia-tiny"));
  EXPECT_THAT(resumed.error(), HasSubstr("--allow-source"));
}

// The audit core, called as the adapters call it.
class SourceAuditTest : public RemoteSourceTest {
 protected:
  void SetUp() override {
    RemoteSourceTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto store = storage::MetricsStore::Open({db_.string()});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto files = FileGate::Beneath({root_.string()});
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = std::make_unique<FileGate>(*std::move(files));
    SourceLister::Options options;
    options.endpoints.hub_endpoint = hub_->url();
    options.clients.hub = *transfer::HttpClient::Create({});
    options.allowed = *SourceAllowList::Parse({"hub:EleutherAI/*"});
    lister_ = *SourceLister::Create(std::move(options));
    audit_ = std::make_unique<SourceAudit>(store_.get(), files_.get(), lister_.get());
  }

  std::unique_ptr<storage::MetricsStore> store_;
  std::unique_ptr<FileGate> files_;
  std::unique_ptr<SourceLister> lister_;
  std::unique_ptr<SourceAudit> audit_;
};

TEST_F(SourceAuditTest, AHubRepoIsListedWithFilesHashesDuplicatesAndProblems) {
  pb::AuditSourceRequest request;
  request.mutable_source()->set_hub(kRepo);
  absl::StatusOr<pb::AuditSourceResponse> audit = audit_->Audit(request, "default", "test");
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_EQ(audit->source(), "hub:EleutherAI/pythia-tiny");
  ASSERT_EQ(audit->steps_size(), 4);
  EXPECT_EQ(audit->steps(0).name(), "step0");
  EXPECT_EQ(audit->steps(0).commit().size(), 40u);
  EXPECT_GT(audit->steps(0).size_bytes(), 0);
  EXPECT_FALSE(audit->steps(1).has_duplicate_of());
  EXPECT_EQ(audit->steps(2).duplicate_of(), 1000);
  bool hashed = false;
  for (const pb::RemoteFile& file : audit->steps(0).files()) {
    hashed = hashed || file.sha256().size() == 64;
  }
  EXPECT_TRUE(hashed);
  EXPECT_THAT(audit->without_step(), ::testing::Contains("main"));
  ASSERT_EQ(audit->problems_size(), 1);
  EXPECT_EQ(audit->problems(0).step(), 4000);
  EXPECT_GT(audit->requests(), 0);

  pb::AuditSourceRequest refused;
  refused.mutable_source()->set_hub("google/bert");
  EXPECT_EQ(audit_->Audit(refused, "default", "test").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(audit_->Audit(pb::AuditSourceRequest(), "default", "test").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SourceAuditTest, AFolderIsListedThroughTheGateWithSizesAndNoHashes) {
  const fs::path dir = MakeCheckpoints("bert", {100, 200});
  WriteFile(dir / "step_300" / "config.json", "{}");  // no weights
  pb::AuditSourceRequest request;
  request.set_checkpoints_dir(dir.string());
  absl::StatusOr<pb::AuditSourceResponse> audit = audit_->Audit(request, "default", "test");
  ASSERT_TRUE(audit.ok()) << audit.status();
  ASSERT_EQ(audit->steps_size(), 2);
  EXPECT_EQ(audit->steps(0).step(), 100);
  EXPECT_EQ(audit->steps(0).size_bytes(), 1002);  // 1000 of weights and "{}"
  for (const pb::RemoteFile& file : audit->steps(0).files()) EXPECT_TRUE(file.sha256().empty());
  ASSERT_EQ(audit->problems_size(), 1);
  EXPECT_EQ(audit->problems(0).step(), 300);
  EXPECT_EQ(audit->requests(), 0);

  pb::AuditSourceRequest outside;
  outside.set_checkpoints_dir(outside_.string());
  EXPECT_EQ(audit_->Audit(outside, "default", "test").status().code(),
            absl::StatusCode::kPermissionDenied);
}

// ---- CheckpointsFromListing and ListedDuplicateOf: pure, no server ----

// A listed Hub step `name` at `step` with one weight file: model.safetensors, or (path_bytes
// > 0) a name that long.
listing::RemoteStep ListedStep(const std::string& name, int64_t step, size_t path_bytes = 0) {
  listing::RemoteStep out;
  out.step = step;
  out.name = name;
  out.repo = "o/m";
  out.revision = name;
  out.commit = std::string(40, 'b');
  listing::RemoteFile& file = out.files.emplace_back();
  file.path = path_bytes == 0 ? "model.safetensors" : std::string(path_bytes, 'p');
  file.size = 10;
  return out;
}

pb::CheckpointSource HubSource() {
  pb::CheckpointSource source;
  source.set_hub("o/m");
  return source;
}

TEST(CheckpointsFromListingTest, EachStepKeepsItsRevisionAndCommitAsText) {
  listing::SourceListing listing;
  listing.steps = {ListedStep("step1", 1)};
  const std::vector<storage::CheckpointSpec> specs = CheckpointsFromListing(
      listing, HubSource(), /*dedupe=*/false, /*follow=*/false, {}, std::nullopt);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].revision, "step1");
  EXPECT_EQ(specs[0].commit, std::string(40, 'b'));
}

TEST(CheckpointsFromListingTest, AStepPastTheDescriptorBoundFailsNamingItAndTheBound) {
  listing::SourceListing listing;
  listing.steps = {ListedStep("step1", 1), ListedStep("step2", 2, kMaxRemoteCheckpointBytes)};
  const std::vector<storage::CheckpointSpec> specs = CheckpointsFromListing(
      listing, HubSource(), /*dedupe=*/false, /*follow=*/false, {}, std::nullopt);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].state, storage::StepState::kPending);
  EXPECT_EQ(specs[1].state, storage::StepState::kFailed);
  EXPECT_TRUE(specs[1].remote.empty());
  EXPECT_THAT(specs[1].error, HasSubstr("step 2"));
  EXPECT_THAT(specs[1].error, HasSubstr(std::to_string(kMaxRemoteCheckpointBytes)));
}

TEST(CheckpointsFromListingTest, AProblemsPathIsEscapedAsAListedStepsIs) {
  listing::SourceListing listing;
  listing.problems = {{"step\n3\x01", 3, "no weights"}};
  const std::vector<storage::CheckpointSpec> specs = CheckpointsFromListing(
      listing, HubSource(), /*dedupe=*/false, /*follow=*/false, {}, std::nullopt);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].path, "hub:o/m@step\\n3\\x01");
  EXPECT_EQ(specs[0].state, storage::StepState::kFailed);
}

TEST(CheckpointsFromListingTest, OnlyAnEarlierFirstMemberMakesADuplicate) {
  listing::SourceListing listing;
  listing.steps = {ListedStep("step1", 1), ListedStep("step2", 2), ListedStep("step3", 3)};
  listing.duplicates = {{{"step1", "step3"}}, {{"step3", "step2"}}, {{"gone", "step2"}}};
  const std::map<std::string, int64_t> duplicate_of = ListedDuplicateOf(listing);
  EXPECT_EQ(duplicate_of, (std::map<std::string, int64_t>{{"step3", 1}}));
  const std::vector<storage::CheckpointSpec> specs = CheckpointsFromListing(
      listing, HubSource(), /*dedupe=*/true, /*follow=*/false, {}, std::nullopt);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[1].state, storage::StepState::kPending);
  EXPECT_EQ(specs[2].state, storage::StepState::kSkipped);
  EXPECT_EQ(specs[2].duplicate_of, 1);
  EXPECT_EQ(specs[2].error, ListedDuplicateReason(1));
}

}  // namespace
}  // namespace anisoscope::server::testing
