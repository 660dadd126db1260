#include "server/grpc/call_credentials.h"

#include <grpcpp/security/auth_context.h>

#include "server/auth/bearer_token.h"
#include "common/embedded_worker_key.h"

namespace anisoscope::server {
namespace {

std::string Metadata(const grpc::ServerContextBase& context, const char* key) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(key);
  return it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
}

}  // namespace

Credentials CallCredentials(const grpc::ServerContextBase& context,
                            const std::string& embedded_key) {
  Credentials credentials;
  credentials.authorization = Metadata(context, "authorization");
  credentials.ns = Metadata(context, kNamespaceMetadata);
  // Compared in constant time (CRYPTO_memcmp), so that the key cannot be guessed byte by byte.
  credentials.embedded =
      !embedded_key.empty() && DigestsEqual(Metadata(context, kEmbeddedWorkerKey), embedded_key);
  // Set only when the server verified the peer's certificate against --tls-client-ca.
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& name : auth->FindPropertyValues("x509_common_name")) {
      credentials.client_cert.assign(name.data(), name.size());
    }
  }
  return credentials;
}

absl::StatusOr<Principal> AuthorizeCall(AccessControl& access,
                                        const grpc::ServerContextBase& context, Action action,
                                        const std::string& embedded_key) {
  return access.Authorize(CallCredentials(context, embedded_key), action);
}

}  // namespace anisoscope::server
