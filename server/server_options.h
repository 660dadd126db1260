// ServerOptions: everything anisoscope-server is configured with; one field per flag.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/extractor.h"

namespace anisoscope::server {

struct ServerOptions {
  // --listen: HOST:PORT to serve on; port 0 picks a free port.
  std::string listen = "127.0.0.1:50051";
  // --db: SQLite database file; created when missing.
  std::string db = "./anisoscope.db";
  // --allow-root (repeatable, at least one): directories checkpoints and probes may be read
  // from.
  std::vector<std::string> allow_roots;
  // --http-listen: HOST:PORT of the HTTP/JSON API and dashboard; empty: no HTTP server.
  std::string http_listen;
  // --web-dir: the dashboard's files; empty: DefaultWebDir().
  std::string web_dir;
  // --workers: embedded worker threads, each with its own extractor; 0 leaves all work to
  // remote anisoscope-worker processes.
  int workers = 1;
  // --lease-timeout: seconds without a heartbeat after which a worker's lease expires.
  double lease_timeout_seconds = 60;
  // --max-attempts: leases of one step that may end without a result before it fails.
  int max_attempts = 3;
  // --device, --dtype, --threads, --batch-size: how each worker's extractor runs.
  analysis::TorchExtractorOptions extractor;
  // --log-level: trace, debug, info, warn, error.
  std::string log_level = "info";
  // --help: print the usage text and exit 0.
  bool help = false;
};

// Parses argv (argv[0] is skipped). Accepts `--flag value` and `--flag=value`.
// INVALID_ARGUMENT with a one-line message for an unknown flag, a missing or malformed
// value, or a missing --allow-root (unless --help).
absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv);

// The --help text, listing every flag with its default.
std::string ServerUsage();

// <directory of the running executable>/../web (build/web for build/bin/anisoscope-server).
std::string DefaultWebDir();

}  // namespace anisoscope::server
