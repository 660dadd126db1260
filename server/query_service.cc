#include "server/query_service.h"

#include "server/queries.h"
#include "server/unary_reactor.h"

namespace anisoscope::server {

grpc::ServerUnaryReactor* QueryServiceImpl::ListRuns(grpc::CallbackServerContext* context,
                                                     const pb::ListRunsRequest* request,
                                                     pb::ListRunsResponse* response) {
  return Respond(context, queries::ListRuns(*store_, *request), response);
}

grpc::ServerUnaryReactor* QueryServiceImpl::QuerySeries(grpc::CallbackServerContext* context,
                                                        const pb::QuerySeriesRequest* request,
                                                        pb::QuerySeriesResponse* response) {
  return Respond(context, queries::QuerySeries(*store_, *request), response);
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryVectors(grpc::CallbackServerContext* context,
                                                         const pb::QueryVectorsRequest* request,
                                                         pb::QueryVectorsResponse* response) {
  return Respond(context, queries::QueryVectors(*store_, *request), response);
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryTrajectory(
    grpc::CallbackServerContext* context, const pb::QueryTrajectoryRequest* request,
    pb::QueryTrajectoryResponse* response) {
  return Respond(context, queries::QueryTrajectory(*store_, *request), response);
}

}  // namespace anisoscope::server
