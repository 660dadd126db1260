#include "client/admin_commands.h"

#include "anisoscope/v1/anisoscope.grpc.pb.h"

namespace anisoscope::client {

FlagSpec AuditLogLimitFlag() {
  return IntFlag("limit", "N", "without a series: the newest N entries of the log (default 100)", 1,
                 INT32_MAX);
}

int RunAuditLog(const ParsedArgs& args, const CommandContext& context) {
  v1::ListAuditRequest request;
  request.set_limit(static_cast<int32_t>(args.GetInt("limit", 0)));
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  v1::ListAuditResponse response;
  grpc::Status status = v1::AdminService::NewStub(*channel)->ListAudit(&rpc, request, &response);
  if (!status.ok()) return context.RpcError(status);
  context.out() << "AT\tACTOR\tNAMESPACE\tACTION\tTARGET\tDETAIL\n";
  for (const v1::AuditEntry& entry : response.entries()) {
    context.out() << entry.at() << "\t" << entry.actor() << "\t" << entry.namespace_() << "\t"
                  << entry.action() << "\t" << entry.target() << "\t" << entry.detail() << "\n";
  }
  return kExitOk;
}

}  // namespace anisoscope::client
