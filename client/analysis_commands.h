// The CLI's commands for the derived analyses (QueryService): token-cloud, correlation,
// isotropic-baseline. Each blocks on one RPC and writes the formatted result to out().
#pragma once

#include <vector>

#include "client/command_context.h"

namespace anisoscope::client {

// token-cloud, correlation, isotropic-baseline, in the order the help lists them.
std::vector<Command> AnalysisCommands();

}  // namespace anisoscope::client
