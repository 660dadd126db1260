#include "client/command_context.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/tls_files.h"

namespace anisoscope::client {

absl::StatusOr<std::shared_ptr<grpc::Channel>> CommandContext::Connect() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // long series and vectors are legitimate
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFromFiles(connection_.tls_ca);
  if (!credentials.ok()) return credentials.status();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(server(), *credentials, args);
  const auto deadline = std::chrono::system_clock::now() + env_.connect_timeout;
  const std::string unreachable = absl::StrCat(
      "cannot reach anisoscope server at ", server(),
      connection_.tls_ca.empty() ? " (set --server or ANISOSCOPE_SERVER)"
                                 : " over TLS (set --server; check that --tls-ca is the CA of "
                                   "the server's certificate)");
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return absl::UnavailableError(unreachable);
    }
    if (!channel->WaitForStateChange(state, deadline)) {
      return absl::UnavailableError(absl::StrCat(
          unreachable, ": no answer within ",
          std::chrono::duration_cast<std::chrono::seconds>(env_.connect_timeout).count(), " s"));
    }
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return channel;
}

void CommandContext::Prepare(grpc::ClientContext* context, bool deadline) const {
  if (deadline) context->set_deadline(std::chrono::system_clock::now() + env_.rpc_timeout);
  if (!connection_.token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", connection_.token));
  }
  if (!connection_.ns.empty()) context->AddMetadata("anisoscope-namespace", connection_.ns);
}

int CommandContext::UsageError(absl::string_view message) const {
  err() << "anisoscope: " << message << "\n";
  return kExitUsage;
}

int CommandContext::Error(absl::string_view message) const {
  err() << "anisoscope: " << message << "\n";
  return kExitFailure;
}

int CommandContext::RpcError(const grpc::Status& status) const {
  const absl::Status mapped = FromGrpcStatus(status);
  if (mapped.code() == absl::StatusCode::kUnavailable && mapped.message().empty()) {
    return Error(absl::StrCat("lost the connection to anisoscope server at ", server()));
  }
  const std::string message =
      absl::StrCat(absl::StatusCodeToString(mapped.code()), ": ", mapped.message());
  if (mapped.code() == absl::StatusCode::kInvalidArgument ||
      mapped.code() == absl::StatusCode::kOutOfRange) {
    return UsageError(message);
  }
  return Error(message);
}

}  // namespace anisoscope::client
