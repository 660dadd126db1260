#include "server/query_service.h"

#include <utility>

#include "common/grpc_status.h"
#include "server/queries.h"

namespace anisoscope::server {
namespace {

// Moves a core result into the reactor's response and finishes the call.
template <typename Response>
grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* context,
                                  absl::StatusOr<Response> result, Response* response) {
  if (result.ok()) *response = std::move(result).value();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

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
