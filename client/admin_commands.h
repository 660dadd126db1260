// The administration side of the CLI: the audit log (AdminService.ListAudit; admin tokens
// only), which `anisoscope audit` without a series prints (client/audit_commands.h). Blocks on
// its RPC; output goes to the context's streams.
#pragma once

#include "client/command_context.h"
#include "client/flags.h"

namespace anisoscope::client {

// --limit N: the newest N entries of the log.
FlagSpec AuditLogLimitFlag();

// Prints the audit log: one tab-separated line per entry, newest first. The exit code.
int RunAuditLog(const ParsedArgs& args, const CommandContext& context);

}  // namespace anisoscope::client
