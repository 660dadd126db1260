// The `audit` command of the CLI: given a series (--hub, --hub-repos, --s3, --checkpoints),
// the series listed by the server before a byte is computed (JobService.AuditSource); given
// none, the audit log (AdminService.ListAudit, admin_commands.h). Blocks on its RPC; output
// goes to the context's streams.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "client/command_context.h"
#include "client/flags.h"

namespace anisoscope::client {

// audit.
std::vector<Command> AuditCommands();

// The request of `audit` from its parsed flags (a relative --checkpoints made absolute
// against `cwd`). INVALID_ARGUMENT naming the flags when not exactly one series is given.
absl::StatusOr<v1::AuditSourceRequest> BuildAuditRequest(const ParsedArgs& args,
                                                         const std::string& cwd);

}  // namespace anisoscope::client
