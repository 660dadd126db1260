// ServerOptions: everything anisoscope-server is configured with; one field per flag.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/extractor/extractor.h"
#include "server/auth/access_control.h"
#include "server/http/loopback.h"
#include "server/wire/request_limits.h"
#include "worker/source_flags.h"
#include "worker/step_bounds.h"

namespace anisoscope::server {

struct ServerOptions {
  // --listen: HOST:PORT to serve on; port 0 picks a free port.
  std::string listen = "127.0.0.1:50051";
  // --db: SQLite database file; created when missing.
  std::string db = "./anisoscope.db";
  // --allow-root (repeatable, at least one): directories checkpoints and probes may be read
  // from.
  std::vector<std::string> allow_roots;
  // --allow-source (repeatable): remote series that may be read (issue 38): "hub:ORG/NAME",
  // "hub:ORG/*", "s3://BUCKET/PREFIX/" (server/sources/source_allow_list.h); none: folders only.
  std::vector<std::string> allow_sources;
  // --http-listen: HOST:PORT of the HTTP/JSON API and dashboard; empty: no HTTP server.
  std::string http_listen;
  // --web-dir: the dashboard's files; empty: DefaultWebDir().
  std::string web_dir;
  // --http-threads: the most HTTP request threads; 0: follow the machine
  // (DefaultHttpThreads, 32 per core, at least 128).
  int http_threads = 0;
  // --http-max-queued: connections that may wait for an HTTP thread; more get a 503.
  int http_max_queued = 256;
  // --http-read-timeout, --http-write-timeout: seconds for one request's line and headers
  // and for one answer, each in all (HttpServer::Options).
  double http_read_timeout_seconds = 5;
  double http_write_timeout_seconds = 10;
  // --cors-origin (repeatable): origins whose pages may read the HTTP API; none by default.
  std::vector<std::string> cors_origins;
  // --max-series-points, --max-vector-values, --max-probe-tokens, --max-watch-streams and
  // its -per-caller and -per-namespace: per-request limits (server/wire/request_limits.h).
  RequestLimits limits;
  // --workers: embedded workers, anisoscope-worker processes the server starts and watches
  // (server/jobs/worker_processes.h); 0 leaves all work to remote workers.
  int workers = 1;
  // --lease-timeout: seconds without a heartbeat after which a worker's lease expires.
  double lease_timeout_seconds = 60;
  // --follow-interval: seconds between two looks at the directories of followed runs.
  double follow_interval_seconds = 2;
  // The least seconds between two listings of one followed remote source; unset:
  // CheckpointFollower::kRemoteFollowInterval (30 s). Not a flag: tests shorten it.
  std::optional<double> remote_follow_interval_seconds;
  // --max-attempts: leases of one step that may end without a result before it fails.
  int max_attempts = 3;
  // --max-leases-per-worker: leases and waits one remote worker identity may hold at once.
  int max_leases_per_worker = 16;
  // --device, --dtype, --threads, --batch-size: how each worker's extractor runs.
  analysis::TorchExtractorOptions extractor;
  // --step-timeout, --worker-memory-max: what one step may cost an embedded worker.
  worker::StepBounds bounds;
  // --hub-endpoint, --hub-token-file, --s3-endpoint, --s3-region (what the server lists remote
  // sources with) and --cache-dir, --cache-max-bytes: all passed on to the embedded workers.
  worker::SourceOptions sources;
  // The embedded workers' executable (main: DefaultWorkerBinary()); empty: threads of this
  // process with the factory's extractors (tests and benchmarks, AnisoscopeServer::Create).
  std::string worker_binary;
  // --auth: "tokens" (a bearer token on every call) or "none"; empty: tokens unless every
  // listen address is loopback (see AuthModeFor).
  std::string auth;
  // --tls-cert, --tls-key: PEM files; serve gRPC and HTTP over TLS. Both or neither.
  std::string tls_cert;
  std::string tls_key;
  // --tls-client-ca: PEM CA bundle; workers presenting a client certificate it signed are
  // authenticated as workers without a token.
  std::string tls_client_ca;
  // --alarm-rules: TOML file of training-health alarm rules (docs/alarms.md); empty: the
  // default set (deploy/alarms/default_rules.toml). A file without rules turns alarms off.
  std::string alarm_rules;
  // --alarm-webhook: http(s) URL each alarm fired or resolved is POSTed to; empty: none.
  std::string alarm_webhook;
  // --alarm-metrics-runs: runs whose alarm and summary gauges /metrics exports.
  int alarm_metrics_runs = 32;
  // --log-level: trace, debug, info, warn, error.
  std::string log_level = "info";
  // --help: print the usage text and exit 0.
  bool help = false;
  // --version: print ServerVersion() and exit 0.
  bool version = false;
};

// Parses argv (argv[0] is skipped) with CLI11: `--flag value` and `--flag=value`, each flag
// also from a --config TOML file and from $ANISOSCOPE_<FLAG>, in that order of precedence
// after the command line.
// INVALID_ARGUMENT with a one-line message naming the flag for an unknown flag, a missing
// or malformed value, or a missing --allow-root (unless --help or --version).
absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv);

// The --help text, listing every flag with its default.
std::string ServerUsage();

// The --version line: "anisoscope-server 0.1.0 (database schema 10)", the project's version
// (common/version.h) and the schema version this build writes (storage/schema.h).
std::string ServerVersion();

// <directory of the running executable>/anisoscope-worker.
std::string DefaultWorkerBinary();

// <directory of the running executable>/../web (build/web for build/bin/anisoscope-server).
std::string DefaultWebDir();

// The access mode of `options`: --auth when given, else tokens unless --listen and
// --http-listen are both loopback. INVALID_ARGUMENT, saying why, for --auth none on an
// address other hosts can reach.
absl::StatusOr<AuthMode> AuthModeFor(const ServerOptions& options);

}  // namespace anisoscope::server
