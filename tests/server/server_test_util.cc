#include "tests/server/server_test_util.h"

#include <unistd.h>

#include <chrono>
#include <fstream>

namespace anisoscope::server::testing {

namespace {

std::chrono::system_clock::time_point Deadline(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

}  // namespace

void ServerFixture::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  base_ = fs::temp_directory_path() / (std::string("server_test_") + info->test_suite_name() + "_" +
                                       info->name() + "_" + std::to_string(::getpid()));
  fs::remove_all(base_);
  root_ = base_ / "root";
  outside_ = base_ / "outside";
  fs::create_directories(root_);
  fs::create_directories(outside_);
  probe_ = root_ / "probe.jsonl";
  // 3 samples, 21 tokens: what FakeMetricsFor reports, so that uploads match the unit.
  std::ofstream(probe_) << "[101, 7, 8, 9, 10, 11, 102]\n[101, 9, 12, 13, 14, 15, 102]\n"
                           "[101, 5, 6, 7, 16, 17, 102]\n";
  db_ = base_ / "metrics.db";
  engine_ = std::make_unique<FakeEngine>();
}

void ServerFixture::TearDown() {
  StopServer();
  fs::remove_all(base_);
}

void ServerFixture::StartServer(int workers) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db = db_.string();
  options.allow_roots = {root_.string()};
  options.workers = workers;
  options.http_listen = http_listen_;
  options.web_dir = web_dir_.string();
  options.lease_timeout_seconds = lease_timeout_seconds_;
  options.max_attempts = max_attempts_;
  options.max_leases_per_worker = max_leases_per_worker_;
  options.auth = auth_;
  options.limits = limits_;
  options.allow_sources = allow_sources_;
  options.remote_follow_interval_seconds = remote_follow_interval_seconds_;
  auto server = AnisoscopeServer::Create(options, engine_->Factory());
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(server).value();
  channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  jobs_ = pb::JobService::NewStub(channel_);
  queries_ = pb::QueryService::NewStub(channel_);
  workers_ = pb::WorkerService::NewStub(channel_);
}

void ServerFixture::StopServer() {
  jobs_.reset();
  queries_.reset();
  workers_.reset();
  channel_.reset();
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
  server_.reset();
}

fs::path ServerFixture::MakeCheckpoints(const std::string& run_dir,
                                        const std::vector<int64_t>& steps) {
  const fs::path dir = root_ / run_dir;
  for (int64_t step : steps) {
    const fs::path step_dir = dir / ("step_" + std::to_string(step));
    fs::create_directories(step_dir);
    std::ofstream(step_dir / "model.safetensors") << std::string(1000, 'w');
    std::ofstream(step_dir / "config.json") << "{}";
  }
  return dir;
}

pb::SubmitJobRequest ServerFixture::DirRequest(const std::string& run, const fs::path& dir,
                                               bool force) const {
  pb::SubmitJobRequest request;
  request.set_run(run);
  request.set_checkpoints_dir(dir.string());
  request.mutable_probe()->set_source(pb::PROBE_SOURCE_TOKENS);
  request.mutable_probe()->set_path(probe_.string());
  request.set_force(force);
  return request;
}

grpc::Status ServerFixture::Submit(const pb::SubmitJobRequest& request, pb::Job* job) {
  grpc::ClientContext context;
  context.set_deadline(Deadline(10));
  return jobs_->SubmitJob(&context, request, job);
}

grpc::Status ServerFixture::GetJob(int64_t id, pb::Job* job) {
  grpc::ClientContext context;
  context.set_deadline(Deadline(10));
  pb::GetJobRequest request;
  request.set_id(id);
  return jobs_->GetJob(&context, request, job);
}

grpc::Status ServerFixture::CancelJob(int64_t id, pb::Job* job) {
  grpc::ClientContext context;
  context.set_deadline(Deadline(10));
  pb::CancelJobRequest request;
  request.set_id(id);
  return jobs_->CancelJob(&context, request, job);
}

std::vector<pb::JobEvent> ServerFixture::WatchAll(int64_t id, grpc::Status* status) {
  grpc::ClientContext context;
  context.set_deadline(Deadline(20));
  pb::WatchJobRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReader<pb::JobEvent>> reader = jobs_->WatchJob(&context, request);
  std::vector<pb::JobEvent> events;
  pb::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  *status = reader->Finish();
  return events;
}

pb::Job ServerFixture::WaitFinal(int64_t id) {
  grpc::Status status;
  std::vector<pb::JobEvent> events = WatchAll(id, &status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  if (events.empty()) {
    ADD_FAILURE() << "no events for job " << id;
    return pb::Job();
  }
  EXPECT_EQ(events.back().kind(), pb::JobEvent::KIND_JOB_FINISHED);
  return events.back().job();
}

}  // namespace anisoscope::server::testing
