// The administration commands of the CLI: audit (AdminService; admin tokens only).
// Each command blocks on its RPC; output goes to the context's streams.
#pragma once

#include <vector>

#include "client/command_context.h"

namespace anisoscope::client {

std::vector<Command> AdminCommands();

}  // namespace anisoscope::client
