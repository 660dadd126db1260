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
  const auto from_env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value == nullptr ? "" : value);
  };
  env.from_env = {from_env("ANISOSCOPE_SERVER"), from_env("ANISOSCOPE_TOKEN"),
                  from_env("ANISOSCOPE_TLS_CA"), from_env("ANISOSCOPE_NAMESPACE")};
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
