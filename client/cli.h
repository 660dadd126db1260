// The `anisoscope` command line: global flags, command dispatch and the top-level help.
// RunCli is main() without the process: tests call it with string streams and a fake
// server address. Blocks for as long as the command does (`--wait` / `watch`: until the
// job ends).
#pragma once

#include <string>
#include <vector>

#include "client/command_context.h"

namespace anisoscope::client {

// The text of `anisoscope --help` (ends with a newline).
std::string TopLevelUsage();

// Runs the CLI on `args` (argv without the program name) and returns the exit code:
// kExitOk, kExitFailure or kExitUsage (command_context.h).
int RunCli(const std::vector<std::string>& args, const CliEnvironment& env);

}  // namespace anisoscope::client
