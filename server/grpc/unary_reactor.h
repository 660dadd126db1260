// Finishing a unary gRPC call on the callback API: the one place a handler's absl::Status
// becomes the call's grpc::Status. Header-only; thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/status/statusor.h"
#include "common/grpc_status.h"

namespace anisoscope::server {

// Finishes the call with `status`.
inline grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* context,
                                         const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Moves a core result into the call's response, then finishes with its status.
template <typename Response>
grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* context,
                                  absl::StatusOr<Response> result, Response* response) {
  if (result.ok()) *response = std::move(result).value();
  return Respond(context, result.status());
}

}  // namespace anisoscope::server
