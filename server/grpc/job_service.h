// JobService adapter: validates requests, calls the JobRunner, maps the status.
//
// Callback API; handlers never wait for extraction (they do short store and file-system
// reads; AuditSource lists a remote series, bounded by the lister's ListingBounds and
// timeouts). WatchJob streams through a write reactor that queues events (bounded: a reader
// that falls behind gets the job's latest state) and writes them one at a time; streams are
// bounded in all, per caller and per namespace (server/jobs/watch_streams.h). Every call is
// authorized first (reads: kRead; submit, cancel and audit: kWrite) and acts in its caller's
// namespace. `runner`, `submission`, `audit` and `access` are not owned
// and outlive the grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/jobs/job_runner.h"
#include "server/jobs/job_submission.h"
#include "server/jobs/source_audit.h"
#include "server/jobs/watch_streams.h"
#include "server/wire/request_limits.h"

namespace anisoscope::server {

class JobServiceImpl final : public ::anisoscope::v1::JobService::CallbackService {
 public:
  // None owned; each must outlive the service.
  JobServiceImpl(JobRunner* runner, const JobSubmission* submission, const SourceAudit* audit,
                 AccessControl* access, const RequestLimits& limits)
      : runner_(runner),
        submission_(submission),
        audit_(audit),
        access_(access),
        watch_slots_(limits) {}

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
  grpc::ServerUnaryReactor* AuditSource(grpc::CallbackServerContext* context,
                                        const ::anisoscope::v1::AuditSourceRequest* request,
                                        ::anisoscope::v1::AuditSourceResponse* response) override;

 private:
  JobRunner* const runner_;
  const JobSubmission* const submission_;
  const SourceAudit* const audit_;
  AccessControl* const access_;
  WatchSlots watch_slots_;  // WatchJob streams open now
};

}  // namespace anisoscope::server
