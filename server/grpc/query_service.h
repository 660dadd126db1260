// QueryService adapter: authorizes the call (kRead), calls the query core
// (server/queries/queries.h) in the caller's namespace, maps the status. Callback API; handlers do
// short store reads. `store` and `access` are not owned and outlive the grpc::Server.
#pragma once

#include <grpcpp/grpcpp.h>

#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

class QueryServiceImpl final : public ::anisoscope::v1::QueryService::CallbackService {
 public:
  QueryServiceImpl(storage::MetricsStore* store, AccessControl* access, const RequestLimits& limits)
      : store_(store), access_(access), limits_(limits) {}

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
  grpc::ServerUnaryReactor* QueryTokenCloud(
      grpc::CallbackServerContext* context, const ::anisoscope::v1::QueryTokenCloudRequest* request,
      ::anisoscope::v1::QueryTokenCloudResponse* response) override;
  grpc::ServerUnaryReactor* QueryCorrelation(
      grpc::CallbackServerContext* context,
      const ::anisoscope::v1::QueryCorrelationRequest* request,
      ::anisoscope::v1::QueryCorrelationResponse* response) override;
  grpc::ServerUnaryReactor* ListAlarms(grpc::CallbackServerContext* context,
                                       const ::anisoscope::v1::ListAlarmsRequest* request,
                                       ::anisoscope::v1::ListAlarmsResponse* response) override;
  grpc::ServerUnaryReactor* ListMetrics(grpc::CallbackServerContext* context,
                                        const ::anisoscope::v1::ListMetricsRequest* request,
                                        ::anisoscope::v1::ListMetricsResponse* response) override;
  grpc::ServerUnaryReactor* QueryIsotropicBaseline(
      grpc::CallbackServerContext* context,
      const ::anisoscope::v1::QueryIsotropicBaselineRequest* request,
      ::anisoscope::v1::QueryIsotropicBaselineResponse* response) override;

 private:
  storage::MetricsStore* const store_;
  AccessControl* const access_;
  const RequestLimits limits_;
};

}  // namespace anisoscope::server
