// JobService adapter: validates requests, calls the JobRunner, maps the status.
//
// Callback API; handlers never wait for extraction (they do short store and file-system
// reads). WatchJob streams through a write reactor that queues events and writes them one
// at a time. Every call is authorized first (reads: kRead; submit and cancel: kWrite) and
// acts in its caller's namespace. `runner`, `policy`, `store` and `access` are not owned
// and outlive the grpc::Server.
#pragma once

#include <atomic>

#include <grpcpp/grpcpp.h>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "common/path_policy.h"
#include "server/access_control.h"
#include "server/job_runner.h"
#include "server/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class JobServiceImpl final : public ::anisoscope::v1::JobService::CallbackService {
 public:
  JobServiceImpl(JobRunner* runner, const PathPolicy* policy, storage::MetricsStore* store,
                 AccessControl* access, const RequestLimits& limits)
      : runner_(runner), policy_(policy), store_(store), access_(access), limits_(limits) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const ::anisoscope::v1::SubmitJobRequest* request,
                                      ::anisoscope::v1::Job* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const ::anisoscope::v1::GetJobRequest* request,
                                   ::anisoscope::v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const ::anisoscope::v1::ListJobsRequest* request,
                                     ::anisoscope::v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const ::anisoscope::v1::CancelJobRequest* request,
                                      ::anisoscope::v1::Job* response) override;
  grpc::ServerWriteReactor<::anisoscope::v1::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context,
      const ::anisoscope::v1::WatchJobRequest* request) override;

 private:
  JobRunner* const runner_;
  const PathPolicy* const policy_;
  storage::MetricsStore* const store_;
  const RequestLimits limits_;
  std::atomic<int> open_watches_{0};  // WatchJob streams open now
  AccessControl* const access_;
};

}  // namespace anisoscope::server
