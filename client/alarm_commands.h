// The alarm commands of the CLI: alarms (QueryService.ListAlarms). Blocks on one RPC and
// writes the formatted result to out().
#pragma once

#include <vector>

#include "client/command_context.h"

namespace anisoscope::client {

std::vector<Command> AlarmCommands();

}  // namespace anisoscope::client
