// WorkerOptions: everything anisoscope-worker is configured with; one field per flag,
// parsed with CLI11.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/extractor/extractor.h"
#include "worker/source_flags.h"
#include "worker/step_bounds.h"

namespace anisoscope::worker {

struct WorkerOptions {
  // --server: HOST:PORT of anisoscope-server, or unix:PATH (how the server's own worker
  // processes reach it); default $ANISOSCOPE_SERVER.
  std::string server;
  // The embedded workers' key, from $ANISOSCOPE_EMBEDDED_KEY (removed from the environment
  // once read); empty for other workers.
  std::string embedded_key;
  // --allow-root (repeatable, at least one): the only directories this worker reads
  // checkpoints and probe texts from, whatever the server sends.
  std::vector<std::string> allow_roots;
  // --device, --threads, --batch-size (the dtype comes from the server with each unit).
  analysis::TorchExtractorOptions extractor;
  // --step-timeout, --worker-memory-max.
  StepBounds bounds;
  // --hub-endpoint, --hub-token-file, --s3-endpoint, --s3-region, --cache-dir,
  // --cache-max-bytes: where remote steps come from and the node's cache they land in.
  SourceOptions sources;
  // --name: shown in job status; default HOSTNAME-PID.
  std::string name;
  // --max-units: exit 0 after this many units; 0: no limit.
  int max_units = 0;
  // --idle-exit: exit 0 after this many seconds without work; 0: never.
  double idle_exit_seconds = 0;
  // --token-file: a file holding this worker's bearer token (a worker or admin token);
  // default $ANISOSCOPE_TOKEN; empty: none (--auth none, or a client certificate).
  std::string token_file;
  // The token itself, read from --token-file or $ANISOSCOPE_TOKEN.
  std::string token;
  // --tls-ca: PEM CA of the server's certificate: connect over TLS.
  std::string tls_ca;
  // --tls-cert, --tls-key: a client certificate for servers with --tls-client-ca.
  std::string tls_cert;
  std::string tls_key;
  // --log-level: trace, debug, info, warn, error.
  std::string log_level = "info";
};

// The outcome of parsing argv: options, or a text to print and an exit code (--help and
// --version: 0, a usage error: 2).
struct ParsedWorkerFlags {
  WorkerOptions options;
  bool exit = false;
  int exit_code = 0;
  std::string message;
};

ParsedWorkerFlags ParseWorkerFlags(int argc, const char* const* argv);

}  // namespace anisoscope::worker
