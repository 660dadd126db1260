// QueryService adapter: calls the query core (server/queries.h), maps the status.
// Callback API; handlers do short store reads. `store` is not owned and outlives the
// grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class QueryServiceImpl final : public ::anisoscope::v1::QueryService::CallbackService {
 public:
  explicit QueryServiceImpl(storage::MetricsStore* store) : store_(store) {}

  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* context,
                                     const ::anisoscope::v1::ListRunsRequest* request,
                                     ::anisoscope::v1::ListRunsResponse* response) override;
  grpc::ServerUnaryReactor* QuerySeries(grpc::CallbackServerContext* context,
                                        const ::anisoscope::v1::QuerySeriesRequest* request,
                                        ::anisoscope::v1::QuerySeriesResponse* response) override;
  grpc::ServerUnaryReactor* QueryVectors(grpc::CallbackServerContext* context,
                                         const ::anisoscope::v1::QueryVectorsRequest* request,
                                         ::anisoscope::v1::QueryVectorsResponse* response) override;
  grpc::ServerUnaryReactor* QueryTrajectory(
      grpc::CallbackServerContext* context, const ::anisoscope::v1::QueryTrajectoryRequest* request,
      ::anisoscope::v1::QueryTrajectoryResponse* response) override;

 private:
  storage::MetricsStore* const store_;
};

}  // namespace anisoscope::server
