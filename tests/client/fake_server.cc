#include "tests/client/fake_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <thread>

namespace anisoscope::client {

class FakeServer::JobService final : public v1::JobService::Service {
 public:
  explicit JobService(FakeServer* owner) : owner_(owner) {}

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::Job* reply) override {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    owner_->requests_.submits.push_back(*request);
    *reply = owner_->replies_.job;
    return owner_->replies_.status;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* reply) override {
    return JobReply(request->id(), reply);
  }
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::Job* reply) override {
    return JobReply(request->id(), reply);
  }
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* reply) override {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    owner_->requests_.list_limits.push_back(request->limit());
    for (const v1::Job& job : owner_->replies_.jobs) *reply->add_jobs() = job;
    return owner_->replies_.status;
  }
  grpc::Status AuditSource(grpc::ServerContext*, const v1::AuditSourceRequest* request,
                           v1::AuditSourceResponse* reply) override {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    owner_->requests_.audits.push_back(*request);
    *reply = owner_->replies_.audit;
    return owner_->replies_.status;
  }
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    std::vector<v1::JobEvent> events;
    grpc::Status end;
    bool hang = false;
    {
      std::lock_guard<std::mutex> lock(owner_->mutex_);
      owner_->requests_.job_ids.push_back(request->id());
      if (!owner_->replies_.status.ok()) return owner_->replies_.status;
      events = owner_->replies_.events;
      end = owner_->replies_.watch_end;
      hang = owner_->replies_.watch_hangs;
    }
    for (const v1::JobEvent& event : events) writer->Write(event);
    while (hang && !context->IsCancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return end;
  }

 private:
  grpc::Status JobReply(int64_t id, v1::Job* reply) {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    owner_->requests_.job_ids.push_back(id);
    *reply = owner_->replies_.job;
    return owner_->replies_.status;
  }
  FakeServer* owner_;
};

class FakeServer::QueryService final : public v1::QueryService::Service {
 public:
  explicit QueryService(FakeServer* owner) : owner_(owner) {}

  grpc::Status ListRuns(grpc::ServerContext*, const v1::ListRunsRequest*,
                        v1::ListRunsResponse* reply) override {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    for (const v1::Run& run : owner_->replies_.runs) *reply->add_runs() = run;
    return owner_->replies_.status;
  }
  grpc::Status QuerySeries(grpc::ServerContext*, const v1::QuerySeriesRequest* request,
                           v1::QuerySeriesResponse* reply) override {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    owner_->requests_.series.push_back(*request);
    *reply = owner_->replies_.series;
    return owner_->replies_.status;
  }
  grpc::Status QueryVectors(grpc::ServerContext*, const v1::QueryVectorsRequest* request,
                            v1::QueryVectorsResponse* reply) override {
    std::lock_guard<std::mutex> lock(owner_->mutex_);
    owner_->requests_.vectors.push_back(*request);
    *reply = owner_->replies_.vectors;
    return owner_->replies_.status;
  }

 private:
  FakeServer* owner_;
};

FakeServer::FakeServer()
    : job_service_(std::make_unique<JobService>(this)),
      query_service_(std::make_unique<QueryService>(this)) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(query_service_.get());
  server_ = builder.BuildAndStart();
  address_ = "127.0.0.1:" + std::to_string(port);
}

FakeServer::~FakeServer() { server_->Shutdown(); }

FakeRequests FakeServer::requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

}  // namespace anisoscope::client
