// A temp directory tree (allowed root, outside dir, checkpoints, probe) and an in-process
// AnisoscopeServer on 127.0.0.1:0 with FakeExtractors, reached through a real channel.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "server/anisoscope_server.h"
#include "tests/server/fake_extractor.h"

namespace anisoscope::server::testing {

namespace fs = std::filesystem;
namespace pb = ::anisoscope::v1;

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts (or restarts, on the same database) the server with a fresh FakeEngine unless
  // `engine` is given.
  void StartServer(int workers = 1);
  void StopServer();

  // <root>/<run_dir>/step_<step> with one 1000-byte file per step.
  fs::path MakeCheckpoints(const std::string& run_dir, const std::vector<int64_t>& steps);

  pb::SubmitJobRequest DirRequest(const std::string& run, const fs::path& dir,
                                  bool force = false) const;
  grpc::Status Submit(const pb::SubmitJobRequest& request, pb::Job* job);
  grpc::Status GetJob(int64_t id, pb::Job* job);
  grpc::Status CancelJob(int64_t id, pb::Job* job);
  // All events of WatchJob(id) until the stream ends; `status` gets the stream's status.
  std::vector<pb::JobEvent> WatchAll(int64_t id, grpc::Status* status);
  // Watches until the job is final and returns it (fails the test on a stream error).
  pb::Job WaitFinal(int64_t id);

  fs::path base_;
  fs::path root_;
  fs::path outside_;
  fs::path probe_;
  fs::path db_;
  // Set before StartServer to serve the HTTP API too (ServerOptions::http_listen, web_dir).
  std::string http_listen_;
  fs::path web_dir_;
  // Set before StartServer: ServerOptions::lease_timeout_seconds and max_attempts.
  double lease_timeout_seconds_ = 60;
  int max_attempts_ = 3;
  // Set before StartServer: ServerOptions::max_leases_per_worker.
  int max_leases_per_worker_ = 16;
  // Set before StartServer: ServerOptions::auth ("" leaves the loopback default, none).
  std::string auth_;
  // Set before StartServer: ServerOptions::limits.
  RequestLimits limits_;
  // Set before StartServer: ServerOptions::allow_sources (--allow-source).
  std::vector<std::string> allow_sources_;
  // Set before StartServer: ServerOptions::remote_follow_interval_seconds.
  std::optional<double> remote_follow_interval_seconds_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<AnisoscopeServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::QueryService::Stub> queries_;
  std::unique_ptr<pb::WorkerService::Stub> workers_;
};

}  // namespace anisoscope::server::testing
