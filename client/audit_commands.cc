#include "client/audit_commands.h"

#include "absl/status/status.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "client/admin_commands.h"
#include "client/job_commands.h"
#include "client/source_flags.h"
#include "client/source_formatters.h"

namespace anisoscope::client {
namespace {

const std::vector<SeriesFlag>& AuditFolders() {
  static const auto* folders = new std::vector<SeriesFlag>{{"checkpoints", "DIR"}};
  return *folders;
}

// True when `args` name a series (a source or --checkpoints): else `audit` is the log's.
bool NamesSeries(const ParsedArgs& args) {
  for (const FlagSpec& flag : SourceFlags()) {
    if (args.Has(flag.name)) return true;
  }
  return args.Has("checkpoints");
}

int RunAudit(const ParsedArgs& args, const CommandContext& context) {
  if (!NamesSeries(args)) {
    if (args.Has("format")) {
      return context.UsageError(
          "audit: --format applies to a series' audit (--hub, --hub-repos, --s3 or "
          "--checkpoints); the log is tab-separated");
    }
    return RunAuditLog(args, context);
  }
  if (args.Has("limit")) {
    return context.UsageError("audit: --limit applies to the audit log (given no series)");
  }
  absl::StatusOr<v1::AuditSourceRequest> request = BuildAuditRequest(args, context.cwd());
  if (!request.ok()) return context.UsageError(request.status().message());
  auto channel = context.Connect();
  if (!channel.ok()) return context.Error(channel.status().message());
  grpc::ClientContext rpc;
  context.Prepare(&rpc);
  v1::AuditSourceResponse response;
  const grpc::Status status =
      v1::JobService::NewStub(*channel)->AuditSource(&rpc, *request, &response);
  if (!status.ok()) return context.RpcError(status);
  context.out() << (args.GetString("format", "table") == "json" ? AuditJson(response)
                                                                : AuditTable(response));
  return kExitOk;
}

}  // namespace

absl::StatusOr<v1::AuditSourceRequest> BuildAuditRequest(const ParsedArgs& args,
                                                         const std::string& cwd) {
  v1::AuditSourceRequest request;
  absl::StatusOr<bool> remote = ReadSource(args, "audit", AuditFolders(), request.mutable_source());
  if (!remote.ok()) return remote.status();
  if (*remote) return request;
  request.clear_source();
  if (!args.Has("checkpoints")) {
    return absl::InvalidArgumentError(OneSeriesMessage("audit", AuditFolders()));
  }
  request.set_checkpoints_dir(AbsolutePath(args.GetString("checkpoints"), cwd));
  return request;
}

std::vector<Command> AuditCommands() {
  CommandSpec audit;
  audit.name = "audit";
  audit.synopsis =
      "(--hub ORG/NAME | --hub-repos PATTERN [--revision R] | --s3 s3://BUCKET/PREFIX/ |\n"
      "--checkpoints DIR) [--revisions A,B,...] [--glob PATTERN] [--format table|json]\n"
      "audit [--limit N]";
  audit.summary =
      "list a series' steps, files, sizes and duplicates before computing on it; without\n"
      "a series, the audit log (admins)";
  audit.flags = SourceFlags();
  audit.flags.push_back(StringFlag("checkpoints", "DIR",
                                   "a directory on the server whose subdirectories are the steps"));
  audit.flags.push_back(
      ChoiceFlag("format", {"table", "json"},
                 "table (default): one row per step, then the problems and the names that carry\n"
                 "no step; json: the answer as the HTTP API's /api/v1/audit writes it"));
  audit.flags.push_back(AuditLogLimitFlag());
  audit.details =
      "The server lists the series (its endpoints and credentials, within its\n"
      "--allow-source; a folder within its --allow-root) and reads no weight byte: each\n"
      "step with its revision, the commit it was listed at, its files and their size;\n"
      "SAME AS names an earlier step whose weights are the same bytes (from the Hub's\n"
      "sha256 of each file; a folder's weights are not read, so none there), which\n"
      "'submit --dedupe' skips before downloading. Problems are missing or unreadable\n"
      "steps, each naming its repo, revision and file. Needs a writer's token.\n"
      "\n"
      "Without a series it lists the audit log (admins only): one tab-separated line per\n"
      "entry, newest first: time (UTC), actor (a token's name, cert:CN for a worker's\n"
      "certificate, host:USER for commands on the server host), namespace, action (submit,\n"
      "cancel, complete, token.create, token.revoke, namespace.set), target and detail.\n";
  return {{audit, RunAudit}};
}

}  // namespace anisoscope::client
