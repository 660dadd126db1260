// HttpServer: the HTTP/JSON API (/api/v1/...) and the dashboard's static files, served by
// cpp-httplib on its own thread pool beside the gRPC server.
//
// Every /api/v1 route parses its query parameters into the gRPC request message (proto
// JSON mapping: snake_case or lowerCamelCase names, unknown names are a 400), calls the
// same core function as the gRPC service (server/queries/queries.h) and answers the response
// message as proto JSON, or an error body {"error":{"code","status","message"}} with the
// HTTP status of the absl::StatusCode (http_json.h). /metrics is the Prometheus text
// exposition of the server's counts (ServiceMetrics). Other paths are files under
// `web_dir` (index.html at /), never outside it (static_files.h); 503 when `web_dir` does
// not exist. The routes are one table (http_routes.h).
//
// Under load: answers of store-backed queries are kept encoded until the store changes
// (ResponseCache), sent as 304 to a client whose copy is current (ETag / If-None-Match)
// and gzipped to one that accepts it; connections are kept alive, but a thread pool that
// grows per connection (HttpThreadPool) and "Connection: close" while connections wait
// keep idle ones from holding the threads; the listen backlog is the system's maximum.
//
// Against hostile clients and pages: before any route, the walls of http_walls.h (no
// request body, GET and HEAD only, CORS only for listed origins, and without tokens only
// loopback Hosts and no foreign Origin); every connection under whole-request deadlines
// and a bound on its request's head (http_connection.h); at most `max_queued` connections
// waiting for a thread, more answered 503.
//
// Thread-safe. Handlers run on the server's own threads and block on store reads (the
// audit of a series also on its listing).
// `store`, `runner` and `access` are not owned and must outlive the HttpServer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/auth/access_control.h"
#include "server/http/http_thread_pool.h"
#include "server/http/response_cache.h"
#include "server/jobs/job_runner.h"
#include "server/jobs/source_audit.h"
#include "server/monitoring/service_metrics.h"
#include "server/wire/request_limits.h"
#include "storage/metrics_store.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace anisoscope::server {

class HttpServer {
 public:
  struct Options {
    // HOST:PORT to listen on; port 0 picks a free port.
    std::string listen = "127.0.0.1:8080";
    // Directory of the dashboard's files; checked on each request (it may appear later).
    std::string web_dir;
    // The most request threads (each open connection holds one); 0: DefaultHttpThreads().
    int threads = 0;
    // Memory for encoded answers kept until the store changes (ResponseCache).
    size_t cache_bytes = 64 << 20;
    RequestLimits limits;
    // PEM certificate chain and private key: serve HTTPS; both empty: plain HTTP.
    std::string tls_cert;
    std::string tls_key;
    // A request's line and headers must arrive within this of its first byte (and the TLS
    // handshake within this of the accept); an answer must be sent within
    // `write_timeout_seconds` of its first byte. Else the connection is closed.
    double read_timeout_seconds = 5;
    double write_timeout_seconds = 10;
    // Connections that may wait for a thread once `threads` are busy; more are answered 503.
    int max_queued = 256;
    // Origins (scheme://host[:port]) whose pages may read the API: they get
    // Access-Control-Allow-Origin. None: the dashboard is same-origin.
    std::vector<std::string> cors_origins;
    // More Prometheus text for /metrics, given the caller's namespace (the alarms' run
    // gauges, server/alarms/alarm_monitor.h). May be unset.
    std::function<std::string(const std::string& ns)> namespace_metrics;
    // The audit of a series, GET /api/v1/audit (writers; not owned, outlives the server).
    // Null: the route answers UNIMPLEMENTED.
    const SourceAudit* audit = nullptr;
  };

  // Binds and starts serving. INVALID_ARGUMENT for a listen address that is not
  // HOST:PORT, a certificate or key that cannot be loaded, a timeout that is not positive
  // or a CORS origin that is not one (NormalizeOrigin), UNAVAILABLE when it cannot be
  // bound (common/listen_check.h's message when the port is in use). `access` authorizes every API request; without tokens (or without `access`) the
  // loopback-only walls apply. With `metrics` (not owned), the API's latency is recorded
  // and /metrics served.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(const Options& options,
                                                            storage::MetricsStore* store,
                                                            JobRunner* runner,
                                                            AccessControl* access,
                                                            ServiceMetrics* metrics = nullptr);
  ~HttpServer();  // Stop.

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound address, e.g. "127.0.0.1:43127" (the real port when the port was 0).
  const std::string& address() const { return address_; }
  int port() const { return port_; }

  // Stops accepting, finishes the requests in progress and joins the threads. Blocks;
  // idempotent.
  void Stop();

 private:
  HttpServer() = default;

  std::unique_ptr<ResponseCache> cache_;
  std::shared_ptr<PoolGauge> pool_gauge_ = std::make_shared<PoolGauge>();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
  int port_ = 0;
};

}  // namespace anisoscope::server
