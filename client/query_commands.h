// The query commands of the CLI: runs, query, vectors, trajectory (QueryService).
// Each command blocks on one RPC and writes the formatted result to out().
#pragma once

#include <vector>

#include "client/command_context.h"

namespace anisoscope::client {

// runs, query, vectors, trajectory, in the order the help lists them.
std::vector<Command> QueryCommands();

}  // namespace anisoscope::client
