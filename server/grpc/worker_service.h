// WorkerService adapter: hands the JobRunner's leases to workers and takes their
// heartbeats, uploads and failures. Every call is authorized for Action::kWork (a worker
// or admin token, a verified client certificate, or the embedded workers' key); the
// caller's Principal (name, work scope) is the identity its leases are bound to. Callback
// API: LeaseWork long-polls without holding a thread (the runner answers the reactor when a
// unit or the deadline comes). `runner` and `access` are not owned and outlive the
// grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/jobs/job_runner.h"

namespace anisoscope::server {

class WorkerServiceImpl final : public ::anisoscope::v1::WorkerService::CallbackService {
 public:
  // Calls whose kEmbeddedWorkerKey metadata equals `embedded_key` come from the server's
  // embedded workers.
  WorkerServiceImpl(JobRunner* runner, AccessControl* access, std::string embedded_key)
      : runner_(runner), access_(access), embedded_key_(std::move(embedded_key)) {}

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
  JobRunner* const runner_;
  AccessControl* const access_;
  const std::string embedded_key_;
};

}  // namespace anisoscope::server
