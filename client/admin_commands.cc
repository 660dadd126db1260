#include "client/admin_commands.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"

namespace anisoscope::client {
namespace {

int RunAudit(const ParsedArgs& args, const CommandContext& context) {
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

}  // namespace

std::vector<Command> AdminCommands() {
  CommandSpec audit;
  audit.name = "audit";
  audit.synopsis = "[--limit N]";
  audit.summary = "list who submitted, cancelled, stored steps and changed tokens (admins)";
  audit.flags = {IntFlag("limit", "N", "the newest N entries (default 100)", 1, INT32_MAX)};
  audit.details =
      "One tab-separated line per entry, newest first: time (UTC), actor (a token's name,\n"
      "cert:CN for a worker's certificate, host:USER for commands on the server host),\n"
      "namespace, action (submit, cancel, complete, token.create, token.revoke,\n"
      "namespace.set), target and detail.\n";
  return {{audit, RunAudit}};
}

}  // namespace anisoscope::client
