#include "server/grpc/query_service.h"

#include "server/grpc/call_credentials.h"
#include "server/grpc/unary_reactor.h"
#include "server/queries/derived_queries.h"
#include "server/queries/queries.h"

namespace anisoscope::server {

grpc::ServerUnaryReactor* QueryServiceImpl::ListRuns(grpc::CallbackServerContext* context,
                                                     const pb::ListRunsRequest* request,
                                                     pb::ListRunsResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kRead, response,
      [&](const Principal& caller) { return queries::ListRuns(*store_, caller.ns, *request); });
}

grpc::ServerUnaryReactor* QueryServiceImpl::ListAlarms(grpc::CallbackServerContext* context,
                                                       const pb::ListAlarmsRequest* request,
                                                       pb::ListAlarmsResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kRead, response,
      [&](const Principal& caller) { return queries::ListAlarms(*store_, caller.ns, *request); });
}

grpc::ServerUnaryReactor* QueryServiceImpl::ListMetrics(grpc::CallbackServerContext* context,
                                                        const pb::ListMetricsRequest* request,
                                                        pb::ListMetricsResponse* response) {
  return RespondAuthorized(*access_, context, Action::kRead, response, [&](const Principal&) {
    return absl::StatusOr<pb::ListMetricsResponse>(queries::ListMetrics(*request));
  });
}

grpc::ServerUnaryReactor* QueryServiceImpl::QuerySeries(grpc::CallbackServerContext* context,
                                                        const pb::QuerySeriesRequest* request,
                                                        pb::QuerySeriesResponse* response) {
  return RespondAuthorized(*access_, context, Action::kRead, response,
                           [&](const Principal& caller) {
                             return queries::QuerySeries(*store_, caller.ns, *request, limits_);
                           });
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryVectors(grpc::CallbackServerContext* context,
                                                         const pb::QueryVectorsRequest* request,
                                                         pb::QueryVectorsResponse* response) {
  return RespondAuthorized(*access_, context, Action::kRead, response,
                           [&](const Principal& caller) {
                             return queries::QueryVectors(*store_, caller.ns, *request, limits_);
                           });
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryTrajectory(
    grpc::CallbackServerContext* context, const pb::QueryTrajectoryRequest* request,
    pb::QueryTrajectoryResponse* response) {
  return RespondAuthorized(*access_, context, Action::kRead, response,
                           [&](const Principal& caller) {
                             return queries::QueryTrajectory(*store_, caller.ns, *request, limits_);
                           });
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryTokenCloud(
    grpc::CallbackServerContext* context, const pb::QueryTokenCloudRequest* request,
    pb::QueryTokenCloudResponse* response) {
  return RespondAuthorized(*access_, context, Action::kRead, response,
                           [&](const Principal& caller) {
                             return queries::QueryTokenCloud(*store_, caller.ns, *request, limits_);
                           });
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryCorrelation(
    grpc::CallbackServerContext* context, const pb::QueryCorrelationRequest* request,
    pb::QueryCorrelationResponse* response) {
  return RespondAuthorized(
      *access_, context, Action::kRead, response, [&](const Principal& caller) {
        return queries::QueryCorrelation(*store_, caller.ns, *request, limits_);
      });
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryIsotropicBaseline(
    grpc::CallbackServerContext* context, const pb::QueryIsotropicBaselineRequest* request,
    pb::QueryIsotropicBaselineResponse* response) {
  return RespondAuthorized(*access_, context, Action::kRead, response, [&](const Principal&) {
    return queries::QueryIsotropicBaseline(*request);
  });
}

}  // namespace anisoscope::server
