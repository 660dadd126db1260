#include "server/query_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/metrics/checkpoint_metrics.h"
#include "common/grpc_status.h"
#include "server/job_request.h"
#include "server/proto_convert.h"

namespace anisoscope::server {
namespace {

grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* context,
                                  const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status ValidateStepRange(bool has_from, int64_t from, bool has_to, int64_t to) {
  if (has_from && has_to && from > to) {
    return absl::InvalidArgumentError(absl::StrCat("from_step ", from, " is after to_step ", to));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* QueryServiceImpl::ListRuns(grpc::CallbackServerContext* context,
                                                     const pb::ListRunsRequest* /*request*/,
                                                     pb::ListRunsResponse* response) {
  absl::StatusOr<std::vector<storage::RunInfo>> runs = store_->ListRuns();
  if (runs.ok()) {
    for (const storage::RunInfo& run : *runs) ToProto(run, response->add_runs());
  }
  return Respond(context, runs.status());
}

grpc::ServerUnaryReactor* QueryServiceImpl::QuerySeries(grpc::CallbackServerContext* context,
                                                        const pb::QuerySeriesRequest* request,
                                                        pb::QuerySeriesResponse* response) {
  absl::Status status = ValidateRunName(request->run());
  if (status.ok() && request->metric().empty()) {
    status = absl::InvalidArgumentError("metric is required");
  }
  if (status.ok()) {
    status = ValidateStepRange(request->has_from_step(), request->from_step(),
                               request->has_to_step(), request->to_step());
  }
  if (!status.ok()) return Respond(context, status);
  absl::StatusOr<storage::SeriesResult> result = store_->QuerySeries(FromProto(*request));
  if (result.ok()) ToProto(*result, request->metric(), response);
  return Respond(context, result.status());
}

grpc::ServerUnaryReactor* QueryServiceImpl::QueryVectors(grpc::CallbackServerContext* context,
                                                         const pb::QueryVectorsRequest* request,
                                                         pb::QueryVectorsResponse* response) {
  absl::Status status = ValidateRunName(request->run());
  const std::vector<std::string>& kinds = analysis::VectorKinds();
  if (status.ok() && std::find(kinds.begin(), kinds.end(), request->kind()) == kinds.end()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("kind must be q_mean or k_mean, got '", request->kind(), "'"));
  }
  if (status.ok() && (request->layer() < 0 || request->head() < 0)) {
    status = absl::InvalidArgumentError("layer and head must be >= 0");
  }
  if (status.ok()) {
    status = ValidateStepRange(request->has_from_step(), request->from_step(),
                               request->has_to_step(), request->to_step());
  }
  if (!status.ok()) return Respond(context, status);
  absl::StatusOr<storage::VectorResult> result = store_->QueryVectors(FromProto(*request));
  if (result.ok()) ToProto(*result, response);
  return Respond(context, result.status());
}

}  // namespace anisoscope::server
