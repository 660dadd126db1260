// RunCli as a user at a terminal-less shell runs it, for the CLI's tests: against `address`
// (a FakeServer's) unless it is empty, from /home/me/work, its stdout and stderr captured.
#pragma once

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli.h"

namespace anisoscope::client::testing {

struct CliRun {
  int code = 0;
  std::string out, err;
};

inline CliRun RunCliAt(const std::string& address, std::vector<std::string> args) {
  if (!address.empty()) args.insert(args.begin(), {"--server", address});
  std::ostringstream out, err;
  CliEnvironment env;
  env.out = &out;
  env.err = &err;
  env.cwd = "/home/me/work";
  env.connect_timeout = std::chrono::milliseconds(2000);
  CliRun run;
  run.code = RunCli(args, env);
  run.out = out.str();
  run.err = err.str();
  return run;
}

}  // namespace anisoscope::client::testing
