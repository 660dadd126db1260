// ServerOptions: everything anisoscope-server is configured with; one field per flag.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/extractor.h"
#include "server/access_control.h"
#include "server/request_limits.h"

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
  // --http-threads: the most HTTP request threads; 0: follow the machine
  // (DefaultHttpThreads, 32 per core, at least 128).
  int http_threads = 0;
  // --max-series-points, --max-watch-streams: per-request limits (server/request_limits.h).
  RequestLimits limits;
  // --workers: embedded worker threads, each with its own extractor; 0 leaves all work to
  // remote anisoscope-worker processes.
  int workers = 1;
  // --lease-timeout: seconds without a heartbeat after which a worker's lease expires.
  double lease_timeout_seconds = 60;
  // --follow-interval: seconds between two looks at the directories of followed runs.
  double follow_interval_seconds = 2;
  // --max-attempts: leases of one step that may end without a result before it fails.
  int max_attempts = 3;
  // --device, --dtype, --threads, --batch-size: how each worker's extractor runs.
  analysis::TorchExtractorOptions extractor;
  // --auth: "tokens" (a bearer token on every call) or "none"; empty: tokens unless every
  // listen address is loopback (see AuthModeFor).
  std::string auth;
  // --tls-cert, --tls-key: PEM files; serve gRPC and HTTP over TLS. Both or neither.
  std::string tls_cert;
  std::string tls_key;
  // --tls-client-ca: PEM CA bundle; workers presenting a client certificate it signed are
  // authenticated as workers without a token.
  std::string tls_client_ca;
  // --log-level: trace, debug, info, warn, error.
  std::string log_level = "info";
  // --help: print the usage text and exit 0.
  bool help = false;
};

// Parses argv (argv[0] is skipped) with CLI11: `--flag value` and `--flag=value`, each flag
// also from a --config TOML file and from $ANISOSCOPE_<FLAG>, in that order of precedence
// after the command line.
// INVALID_ARGUMENT with a one-line message naming the flag for an unknown flag, a missing
// or malformed value, or a missing --allow-root (unless --help).
absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv);

// The --help text, listing every flag with its default.
std::string ServerUsage();

// <directory of the running executable>/../web (build/web for build/bin/anisoscope-server).
std::string DefaultWebDir();

// True when HOST of `host_port` is a loopback address (127.0.0.0/8, ::1, localhost).
bool IsLoopback(const std::string& host_port);
// The access mode of `options`: --auth when given, else tokens unless --listen and
// --http-listen are both loopback. INVALID_ARGUMENT, saying why, for --auth none on an
// address other hosts can reach.
absl::StatusOr<AuthMode> AuthModeFor(const ServerOptions& options);

}  // namespace anisoscope::server
