// The `anisoscope` CLI: wires the process (argv, streams, env, cwd) to RunCli.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "client/cli.h"

int main(int argc, char** argv) {
  // gRPC's own log lines would duplicate the one-line errors the CLI prints.
  setenv("GRPC_VERBOSITY", "NONE", /*overwrite=*/0);
  anisoscope::client::CliEnvironment env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.err_is_tty = isatty(STDERR_FILENO) == 1;
  if (const char* server = std::getenv("ANISOSCOPE_SERVER")) env.env_server = server;
  std::error_code error;
  env.cwd = std::filesystem::current_path(error).string();
  if (error) {
    std::cerr << "anisoscope: cannot read the current directory: " << error.message() << "\n";
    return anisoscope::client::kExitFailure;
  }
  const int code = anisoscope::client::RunCli(std::vector<std::string>(argv + 1, argv + argc), env);
  std::cout.flush();
  return code;
}
