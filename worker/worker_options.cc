#include "worker/worker_options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/embedded_worker_key.h"
#include "common/host_port.h"
#include "common/version.h"
#include "worker/extractor_flags.h"
#include "worker/source_flags.h"

namespace anisoscope::worker {
namespace {

constexpr char kDescription[] =
    "Leases checkpoints from anisoscope-server (WorkerService), runs the probe through each on\n"
    "this machine's device and uploads the metrics. One process per GPU. Exits 0 on SIGTERM\n"
    "(giving its lease back), after --max-units units, or after --idle-exit seconds idle.";

std::string DefaultName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "-", getpid());
}

std::string CheckServer(const std::string& value) {
  if (absl::StartsWith(value, "unix:") && value.size() > 5) return "";
  const absl::StatusOr<HostPort> parsed = ParseHostPort(value);
  return parsed.ok() ? std::string() : std::string(parsed.status().message());
}

}  // namespace

ParsedWorkerFlags ParseWorkerFlags(int argc, const char* const* argv) {
  ParsedWorkerFlags parsed;
  WorkerOptions& options = parsed.options;
  CLI::App app(kDescription, "anisoscope-worker");
  app.set_version_flag("--version", VersionLine("anisoscope-worker"), "print the version, then exit");
  app.add_option("--server", options.server,
                 "HOST:PORT of anisoscope-server, or unix:PATH (default: $ANISOSCOPE_SERVER)")
      ->envname("ANISOSCOPE_SERVER")
      ->required()
      ->check(CLI::Validator(CheckServer, "HOST:PORT"));
  app.add_option("--allow-root", options.allow_roots,
                 "directory checkpoints and probe texts may be read from; repeatable; the worker "
                 "refuses anything else the server sends")
      ->required()
      ->take_all();
  AddExtractorFlags(app, options.extractor, /*with_dtype=*/false);
  AddStepBoundFlags(app, options.bounds);
  AddSourceFlags(app, options.sources);
  app.add_option("--name", options.name, "this worker's name in job status (default HOST-PID)");
  app.add_option("--max-units", options.max_units,
                 "exit 0 after this many checkpoints; 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-exit", options.idle_exit_seconds,
                 "exit 0 after this many seconds without work (batch systems); 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--token-file", options.token_file,
                 "file holding this worker's bearer token, a worker token from 'anisoscope-server "
                 "tokens create --role worker' (default: the token in $ANISOSCOPE_TOKEN)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-ca", options.tls_ca, "PEM CA of the server's certificate: connect over TLS")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM client certificate (servers with --tls-client-ca take it instead of a token)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--log-level", options.log_level, "trace, debug, info, warn or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::ostringstream out, err;
    parsed.exit = true;
    parsed.exit_code = app.exit(error, out, err) == 0 ? 0 : 2;
    parsed.message = parsed.exit_code == 0 ? out.str() : err.str();
    return parsed;
  }
  if (options.name.empty()) options.name = DefaultName();
  if (const char* key = std::getenv(kEmbeddedWorkerKeyVariable)) {
    options.embedded_key = key;
    unsetenv(kEmbeddedWorkerKeyVariable);
  }
  if (!options.token_file.empty()) {
    std::ifstream in(options.token_file);
    std::getline(in, options.token);
    options.token = std::string(absl::StripAsciiWhitespace(options.token));
    if (options.token.empty()) {
      parsed.exit = true;
      parsed.exit_code = 2;
      parsed.message = absl::StrCat("--token-file: ", options.token_file, " holds no token\n");
    }
  } else if (const char* token = std::getenv("ANISOSCOPE_TOKEN")) {
    options.token = token;
  }
  return parsed;
}

}  // namespace anisoscope::worker
