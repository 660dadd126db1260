// WorkerService adapter: hands the JobRunner's leases to workers and takes their
// heartbeats, uploads and failures. Callback API: LeaseWork long-polls without holding a
// thread (the runner answers the reactor when a unit or the deadline comes). `runner` is
// not owned and outlives the grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "server/job_runner.h"

namespace anisoscope::server {

class WorkerServiceImpl final : public ::anisoscope::v1::WorkerService::CallbackService {
 public:
  // Calls whose kEmbeddedWorkerKey metadata equals `embedded_key` come from the server's
  // embedded workers.
  WorkerServiceImpl(JobRunner* runner, std::string embedded_key)
      : runner_(runner), embedded_key_(std::move(embedded_key)) {}

  grpc::ServerUnaryReactor* LeaseWork(grpc::CallbackServerContext* context,
                                      const ::anisoscope::v1::LeaseWorkRequest* request,
                                      ::anisoscope::v1::LeaseWorkResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const ::anisoscope::v1::HeartbeatRequest* request,
                                      ::anisoscope::v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* CompleteWork(grpc::CallbackServerContext* context,
                                         const ::anisoscope::v1::CompleteWorkRequest* request,
                                         ::anisoscope::v1::CompleteWorkResponse* response) override;
  grpc::ServerUnaryReactor* FailWork(grpc::CallbackServerContext* context,
                                     const ::anisoscope::v1::FailWorkRequest* request,
                                     ::anisoscope::v1::FailWorkResponse* response) override;

 private:
  bool IsEmbeddedWorker(const grpc::CallbackServerContext& context) const;

  JobRunner* const runner_;
  const std::string embedded_key_;
};

}  // namespace anisoscope::server
