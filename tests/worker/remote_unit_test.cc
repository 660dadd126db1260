// A remote unit through the worker's UnitRunner: its step listed from the real local Hub
// server (tests/sources/servers/hub_server.py) by the server's own listing code, sent as a
// WorkUnit.remote, fetched into the cache from the worker's own endpoint, read by a fake
// engine through the cache's gate (the snapshot's links into blobs/), and completed with its
// fetch figures while the step stays pinned; then the pin is gone. A fetch that fails fails
// only its unit, naming repo, revision and file. The WorkerService is a fake in this process.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "analysis/extractor/extractor.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "common/file_gate.h"
#include "sources/endpoints/remote_checkpoint.h"
#include "sources/listing/hub_listing.h"
#include "sources/transfer/http_client.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/servers/server_process.h"
#include "worker/remote_source.h"
#include "worker/unit_runner.h"
#include "worker/work_client.h"

namespace anisoscope::worker {
namespace {

namespace fs = std::filesystem;
namespace pb = ::anisoscope::v1;
using source_servers::InCi;
using source_servers::ServerProcess;

constexpr char kRepo[] = "org/tiny-series";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Entries of the cache's pins/ folder: the steps in use.
int Pins(const fs::path& cache_dir) {
  const fs::path dir = cache_dir / ".locks" / "anisoscope" / "pins";
  if (!fs::exists(dir)) return 0;
  return static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

int IncompleteFiles(const fs::path& dir) {
  int count = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 11 && name.substr(name.size() - 11) == ".incomplete") ++count;
  }
  return count;
}

// The WorkerService side: records what the runner sends; CompleteWork notes how many steps
// were pinned while it ran.
class FakeWorkerService final : public pb::WorkerService::Service {
 public:
  explicit FakeWorkerService(fs::path cache_dir) : cache_dir_(std::move(cache_dir)) {}

  grpc::Status LeaseWork(grpc::ServerContext*, const pb::LeaseWorkRequest*,
                         pb::LeaseWorkResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const pb::HeartbeatRequest* request,
                         pb::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (request->has_fetch()) fetches_.push_back(request->fetch());
    response->set_verdict(cancel_when_fetching_ && request->has_fetch()
                              ? pb::HeartbeatResponse::VERDICT_CANCELLED
                              : pb::HeartbeatResponse::VERDICT_CONTINUE);
    return grpc::Status::OK;
  }
  grpc::Status CompleteWork(grpc::ServerContext*, const pb::CompleteWorkRequest* request,
                            pb::CompleteWorkResponse* response) override {
    absl::MutexLock lock(&mu_);
    completed_.push_back(*request);
    pins_at_complete_.push_back(Pins(cache_dir_));
    response->set_state(pb::STEP_STATE_DONE);
    return grpc::Status::OK;
  }
  grpc::Status FailWork(grpc::ServerContext*, const pb::FailWorkRequest* request,
                        pb::FailWorkResponse*) override {
    absl::MutexLock lock(&mu_);
    failed_.push_back(*request);
    pins_at_fail_.push_back(Pins(cache_dir_));
    return grpc::Status::OK;
  }

  void CancelWhenFetching() {
    absl::MutexLock lock(&mu_);
    cancel_when_fetching_ = true;
  }
  std::vector<pb::CompleteWorkRequest> completed() const {
    absl::MutexLock lock(&mu_);
    return completed_;
  }
  std::vector<pb::FailWorkRequest> failed() const {
    absl::MutexLock lock(&mu_);
    return failed_;
  }
  std::vector<pb::FetchProgress> fetches() const {
    absl::MutexLock lock(&mu_);
    return fetches_;
  }
  std::vector<int> pins_at_complete() const {
    absl::MutexLock lock(&mu_);
    return pins_at_complete_;
  }
  std::vector<int> pins_at_fail() const {
    absl::MutexLock lock(&mu_);
    return pins_at_fail_;
  }

 private:
  const fs::path cache_dir_;
  mutable absl::Mutex mu_;
  bool cancel_when_fetching_ = false;
  std::vector<pb::CompleteWorkRequest> completed_;
  std::vector<pb::FailWorkRequest> failed_;
  std::vector<pb::FetchProgress> fetches_;
  std::vector<int> pins_at_complete_;
  std::vector<int> pins_at_fail_;
};

// Reads the checkpoint's config.json and weights through the unit's gate, as the engine
// does, and records the weights' bytes.
class ReadingExtractor : public analysis::Extractor {
 public:
  explicit ReadingExtractor(std::vector<std::string>* weights) : weights_(weights) {}

  absl::StatusOr<analysis::Probe> BuildProbe(const fs::path& dir, const analysis::ProbeSpec& spec,
                                             const FileGate& files) override {
    absl::StatusOr<std::string> config = files.ReadFile(dir / "config.json", 1 << 20);
    if (!config.ok()) return config.status();
    analysis::Probe probe;
    probe.samples = spec.token_ids;
    probe.id = "probe-remote-test";
    probe.description = "test";
    return probe;
  }
  absl::StatusOr<analysis::CheckpointMetrics> Extract(const fs::path& dir,
                                                      const analysis::Probe& probe,
                                                      const analysis::ExtractCallbacks& callbacks,
                                                      const FileGate& files) override {
    absl::StatusOr<std::string> weights = files.ReadFile(dir / "model.safetensors", 1 << 26);
    if (!weights.ok()) return weights.status();
    weights_->push_back(*weights);
    callbacks.progress(1, 1);
    analysis::CheckpointMetrics metrics;
    metrics.num_samples = static_cast<int64_t>(probe.samples.size());
    metrics.seconds = 0.01;
    return metrics;
  }

 private:
  std::vector<std::string>* const weights_;
};

class RemoteUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteStep("step1", "weights of step one", 0);
    WriteStep("step2", "weights of step two", 0);
    WriteStep("step3", "", 6 << 20);  // large enough to be cancelled mid-file
    absl::StatusOr<std::unique_ptr<ServerProcess>> hub =
        ServerProcess::Start("hub_server.py", {"--root", hub_root().string(), "--port", "0"}, 2);
    if (!hub.ok()) {
      if (InCi()) FAIL() << hub.status() << " (required in CI)";
      GTEST_SKIP() << "no Hub test server: " << hub.status();
    }
    hub_ = *std::move(hub);

    transfer_.max_attempts = 2;
    transfer_.initial_backoff = absl::Milliseconds(2);
    transfer_.max_backoff = absl::Milliseconds(20);
    transfer_.connect_timeout = absl::Seconds(5);
    transfer_.stall_timeout = absl::Seconds(5);
    transfer_.progress_interval = absl::Milliseconds(10);

    // The server's side: the branches listed by the listing code the server uses.
    absl::StatusOr<std::unique_ptr<transfer::HttpClient>> client =
        transfer::HttpClient::Create(transfer_);
    ASSERT_TRUE(client.ok()) << client.status();
    listing::HubListingOptions options;
    options.endpoint = hub_->url();
    absl::StatusOr<listing::SourceListing> listed =
        listing::ListHubBranches(**client, kRepo, options);
    ASSERT_TRUE(listed.ok()) << listed.status();
    ASSERT_EQ(listed->steps.size(), 3u);
    for (const listing::RemoteStep& step : listed->steps) {
      remote_.push_back(sources::ToRemoteCheckpoint(step, pb::SOURCE_KIND_HUB));
    }

    service_ = std::make_unique<FakeWorkerService>(cache_dir());
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = pb::WorkerService::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
    client_ = std::make_unique<WorkClient>(stub_.get(), WorkClient::Metadata{});
    MakeRunner(64 << 20);
  }

  void TearDown() override {
    runner_.reset();
    source_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  void MakeRunner(uint64_t cache_max_bytes) {
    runner_.reset();
    source_.reset();
    RemoteSource::Options options;
    // The worker's own endpoint: the same local Hub here, but never taken from the unit.
    options.endpoints.hub_endpoint = hub_->url();
    options.endpoints.hub.endpoint = hub_->url();
    options.endpoints.s3_endpoint = "http://127.0.0.1:9";
    options.cache_dir = cache_dir().string();
    options.cache_max_bytes = cache_max_bytes;
    options.transfer = transfer_;
    absl::StatusOr<std::unique_ptr<RemoteSource>> source = RemoteSource::Create(options);
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = *std::move(source);
    factory_ = [this](const std::string&) -> absl::StatusOr<std::unique_ptr<analysis::Extractor>> {
      return std::make_unique<ReadingExtractor>(&weights_);
    };
    runner_ = std::make_unique<UnitRunner>(&factory_, &own_files_, client_.get(), "test-worker",
                                           UnitRunner::Guard{}, source_.get());
  }

  void WriteStep(const std::string& branch, const std::string& weights, int64_t size) {
    const fs::path folder = hub_root() / kRepo / branch;
    fs::create_directories(folder);
    std::ofstream(folder / "config.json") << R"({"model_type": "bert"})";
    std::ofstream out(folder / "model.safetensors", std::ios::binary);
    out << weights;
    out.close();
    if (size > 0) fs::resize_file(folder / "model.safetensors", size);
  }

  pb::WorkUnit Unit(int index, int next = -1) {
    pb::WorkUnit unit;
    unit.set_lease_id(absl::StrCat("lease-", index, "-", ++leases_));
    unit.set_job_id(7);
    unit.set_run("series");
    unit.set_step(index + 1);
    unit.set_heartbeat_interval_ms(100);
    unit.set_attempt(1);
    *unit.mutable_remote() = remote_[index];
    unit.set_checkpoint_path(sources::DescribeRemoteCheckpoint(remote_[index]));
    if (next >= 0) *unit.mutable_next_remote() = remote_[next];
    unit.mutable_probe()->mutable_tokens()->add_samples()->add_ids(101);
    unit.add_allowed_roots("/nonexistent-namespace-root");
    return unit;
  }

  fs::path hub_root() const { return temp_.path() / "hub"; }
  fs::path cache_dir() const { return temp_.path() / "cache"; }

  TestTempDir temp_;
  std::unique_ptr<ServerProcess> hub_;
  transfer::TransferOptions transfer_;
  std::vector<pb::RemoteCheckpoint> remote_;
  std::unique_ptr<FakeWorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::WorkerService::Stub> stub_;
  std::unique_ptr<WorkClient> client_;
  FileGate own_files_ = FileGate::Beneath({}).value();  // the worker reads no folder
  std::vector<std::string> weights_;
  ExtractorFactory factory_;
  std::unique_ptr<RemoteSource> source_;
  std::unique_ptr<UnitRunner> runner_;
  int leases_ = 0;
};

TEST_F(RemoteUnitTest, RemoteUnitIsFetchedReadFromTheCacheAndCompletedWhilePinned) {
  runner_->Run(Unit(0));
  runner_->Flush();
  ASSERT_TRUE(service_->failed().empty()) << service_->failed()[0].error();
  ASSERT_EQ(service_->completed().size(), 1u);
  ASSERT_EQ(weights_.size(), 1u);
  EXPECT_EQ(weights_[0], "weights of step one");
  const pb::CompleteWorkRequest done = service_->completed()[0];
  EXPECT_TRUE(done.has_fetch());
  EXPECT_FALSE(done.fetch().cache_hit());
  EXPECT_GT(done.fetch().bytes_fetched(), 0);
  EXPECT_GT(done.checkpoint_bytes(), 0);
  EXPECT_EQ(service_->pins_at_complete(), std::vector<int>{1});  // pinned through CompleteWork
  EXPECT_EQ(Pins(cache_dir()), 0);                               // then released
  // The Hugging Face layout: a snapshot of the listed commit whose entries link into blobs/.
  const fs::path snapshot = cache_dir() / "models--org--tiny-series" / "snapshots" /
                            remote_[0].commit() / "model.safetensors";
  EXPECT_TRUE(fs::is_symlink(snapshot));
  EXPECT_EQ(fs::read_symlink(snapshot).string().rfind("../../blobs/", 0), 0u);

  // Again: a cache hit, no byte fetched.
  runner_->Run(Unit(0));
  runner_->Flush();
  ASSERT_EQ(service_->completed().size(), 2u);
  EXPECT_TRUE(service_->completed()[1].fetch().cache_hit());
  EXPECT_EQ(service_->completed()[1].fetch().bytes_fetched(), 0);
  EXPECT_EQ(Pins(cache_dir()), 0);
}

TEST_F(RemoteUnitTest, NextRemoteDownloadsAheadAndIsTakenFromThePrefetch) {
  runner_->Run(Unit(0, /*next=*/1));
  runner_->Flush();
  ASSERT_EQ(service_->completed().size(), 1u);
  const fs::path next = cache_dir() / "models--org--tiny-series" / "snapshots" /
                        remote_[1].commit() / "model.safetensors";
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!fs::exists(next) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(fs::exists(next));
  EXPECT_EQ(Pins(cache_dir()), 1);  // the step fetched ahead, held for the next unit
  hub_.reset();                     // the next unit needs no network
  runner_->Run(Unit(1));
  runner_->Flush();
  ASSERT_TRUE(service_->failed().empty()) << service_->failed()[0].error();
  ASSERT_EQ(weights_.size(), 2u);
  EXPECT_EQ(weights_[1], "weights of step two");
  EXPECT_EQ(Pins(cache_dir()), 0);
}

TEST_F(RemoteUnitTest, StepFetchedAheadIsDroppedWhenTheServerHasNoWork) {
  runner_->Run(Unit(0, /*next=*/1));
  runner_->Flush();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Pins(cache_dir()) == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  runner_->Idle();
  EXPECT_EQ(Pins(cache_dir()), 0);
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
}

TEST_F(RemoteUnitTest, WrongSha256FailsOnlyThatUnitNamingRepoRevisionAndFile) {
  pb::WorkUnit bad = Unit(0);
  for (pb::RemoteFile& file : *bad.mutable_remote()->mutable_files()) {
    if (file.path() == "model.safetensors") file.set_sha256(std::string(64, '0'));
  }
  runner_->Run(bad);
  runner_->Flush();
  ASSERT_EQ(service_->failed().size(), 1u);
  const pb::FailWorkRequest failure = service_->failed()[0];
  EXPECT_EQ(failure.kind(), pb::FailWorkRequest::KIND_FAILED);
  EXPECT_TRUE(Contains(failure.error(), kRepo)) << failure.error();
  EXPECT_TRUE(Contains(failure.error(), "step1")) << failure.error();
  EXPECT_TRUE(Contains(failure.error(), "model.safetensors")) << failure.error();
  EXPECT_EQ(service_->pins_at_fail(), std::vector<int>{0});  // a failed fetch pins nothing
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
  EXPECT_TRUE(weights_.empty());

  // The next unit runs as if nothing happened.
  runner_->Run(Unit(1));
  runner_->Flush();
  ASSERT_EQ(service_->completed().size(), 1u);
  EXPECT_EQ(weights_, std::vector<std::string>{"weights of step two"});
}

TEST_F(RemoteUnitTest, MissingFileFailsTheUnitAsNotFound) {
  pb::WorkUnit bad = Unit(0);
  bad.mutable_remote()->mutable_files(0)->set_path("no-such-file.json");
  runner_->Run(bad);
  runner_->Flush();
  ASSERT_EQ(service_->failed().size(), 1u);
  EXPECT_EQ(service_->failed()[0].kind(), pb::FailWorkRequest::KIND_FAILED);
  EXPECT_TRUE(Contains(service_->failed()[0].error(), "no-such-file.json"))
      << service_->failed()[0].error();
  EXPECT_TRUE(service_->completed().empty());
}

TEST_F(RemoteUnitTest, HostileNameFromTheServerIsRefusedBeforeAnyRequest) {
  pb::WorkUnit bad = Unit(0);
  bad.mutable_remote()->mutable_files(0)->set_path("../../escape");
  runner_->Run(bad);
  runner_->Flush();
  ASSERT_EQ(service_->failed().size(), 1u);
  EXPECT_EQ(service_->failed()[0].kind(), pb::FailWorkRequest::KIND_FAILED);
  EXPECT_TRUE(Contains(service_->failed()[0].error(), "RemoteCheckpoint.files[0].path"))
      << service_->failed()[0].error();
  EXPECT_FALSE(fs::exists(temp_.path() / "escape"));
}

TEST_F(RemoteUnitTest, FullCacheIsRetryable) {
  MakeRunner(/*cache_max_bytes=*/8);
  runner_->Run(Unit(0));
  runner_->Flush();
  ASSERT_EQ(service_->failed().size(), 1u);
  EXPECT_EQ(service_->failed()[0].kind(), pb::FailWorkRequest::KIND_RETRYABLE);
  EXPECT_TRUE(Contains(service_->failed()[0].error(), "--cache-max-bytes"))
      << service_->failed()[0].error();
}

TEST_F(RemoteUnitTest, HeartbeatsCarryTheDownloadAndACancelStopsIt) {
  // Every path: the weights come from the CDN listener (the Hub's LFS redirect).
  ASSERT_TRUE(hub_->AddFault(R"({"kind": "throttle", "bytes_per_second": 262144})").ok());
  service_->CancelWhenFetching();
  const absl::Time start = absl::Now();
  runner_->Run(Unit(2));
  runner_->Flush();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // 6 MiB at 256 KiB/s would take 24 s
  EXPECT_TRUE(service_->completed().empty());
  EXPECT_TRUE(service_->failed().empty());  // the server ended the lease: nothing to report
  ASSERT_FALSE(service_->fetches().empty());
  const pb::FetchProgress progress = service_->fetches()[0];
  int64_t listed = 0;
  for (const pb::RemoteFile& file : remote_[2].files()) listed += static_cast<int64_t>(file.size());
  EXPECT_EQ(progress.bytes_total(), listed);
  EXPECT_GE(progress.bytes_done(), 0);
  EXPECT_EQ(Pins(cache_dir()), 0);
  EXPECT_EQ(IncompleteFiles(cache_dir()), 0);
}

}  // namespace
}  // namespace anisoscope::worker
