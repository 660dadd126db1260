// An in-process fake of the anisoscope JobService and QueryService on 127.0.0.1:0, for
// testing the CLI over a real socket. Replies are set before a command runs; requests
// are recorded. The sync gRPC API is fine here: replies are canned and never block.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anisoscope/v1/anisoscope.grpc.pb.h"

namespace anisoscope::client {

struct FakeReplies {
  grpc::Status status;               // returned by every RPC when not OK
  v1::Job job;                       // SubmitJob, GetJob, CancelJob
  std::vector<v1::Job> jobs;         // ListJobs
  std::vector<v1::JobEvent> events;  // WatchJob, then `watch_end`
  grpc::Status watch_end;
  bool watch_hangs = false;          // WatchJob: after `events`, waits for the client to cancel
  std::vector<v1::Run> runs;         // ListRuns
  v1::QuerySeriesResponse series;    // QuerySeries
  v1::QueryVectorsResponse vectors;  // QueryVectors
  v1::AuditSourceResponse audit;     // AuditSource
};

struct FakeRequests {
  std::vector<v1::SubmitJobRequest> submits;
  std::vector<int64_t> job_ids;  // GetJob, CancelJob, WatchJob
  std::vector<int32_t> list_limits;
  std::vector<v1::QuerySeriesRequest> series;
  std::vector<v1::QueryVectorsRequest> vectors;
  std::vector<v1::AuditSourceRequest> audits;
};

class FakeServer {
 public:
  // Starts listening on 127.0.0.1 at a free port.
  FakeServer();
  ~FakeServer();

  std::string address() const { return address_; }
  FakeReplies& replies() { return replies_; }  // set before running a command
  FakeRequests requests();                     // a copy, thread-safe

 private:
  class JobService;
  class QueryService;
  std::mutex mutex_;
  FakeReplies replies_;
  FakeRequests requests_;
  std::unique_ptr<JobService> job_service_;
  std::unique_ptr<QueryService> query_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace anisoscope::client
