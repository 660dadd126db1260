// What a gRPC call presents to AccessControl: its `authorization` and
// `anisoscope-namespace` metadata, the common name of a verified TLS client certificate,
// and whether it carries this process's embedded workers' key. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"
#include "server/auth/access_control.h"
#include "server/grpc/unary_reactor.h"

namespace anisoscope::server {

// The metadata key that names the namespace a call acts in.
inline constexpr char kNamespaceMetadata[] = "anisoscope-namespace";

// `embedded_key` empty: the call is never taken for an embedded worker's.
Credentials CallCredentials(const grpc::ServerContextBase& context,
                            const std::string& embedded_key = "");

// access.Authorize(CallCredentials(context, embedded_key), action).
absl::StatusOr<Principal> AuthorizeCall(AccessControl& access,
                                        const grpc::ServerContextBase& context, Action action,
                                        const std::string& embedded_key = "");

// Authorizes a unary call for `action`, then answers it with `core(caller)` (an
// absl::StatusOr<Response>), or with the refusal.
template <typename Response, typename Core>
grpc::ServerUnaryReactor* RespondAuthorized(AccessControl& access,
                                            grpc::CallbackServerContext* context, Action action,
                                            Response* response, Core core,
                                            const std::string& embedded_key = "") {
  absl::StatusOr<Principal> caller = AuthorizeCall(access, *context, action, embedded_key);
  if (!caller.ok()) return Respond(context, caller.status());
  return Respond(context, absl::StatusOr<Response>(core(*caller)), response);
}

}  // namespace anisoscope::server
