// The HTTP API's route table, as HttpServer installs it: the /api/v1 GET routes over the
// query core, the job runner and the audit of a series, /metrics, a 404 for other /api paths, and the dashboard's
// files (static_files.h) for every other path. Each API handler authorizes its caller
// first and answers JSON (http_json.h); handlers run on httplib's threads, may be called
// concurrently, and block on the store and the runner. The table holds no state of its
// own: what it needs comes in a RouteContext, whose pointers must outlive the server.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

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
struct Request;
struct Response;
}  // namespace httplib

namespace anisoscope::server {

// The query parameter that names the namespace a request acts in (see AccessControl).
inline constexpr char kNamespaceParam[] = "namespace";

// What the API's handlers work with (none owned). `cache` may be null: nothing kept.
struct RouteContext {
  storage::MetricsStore* store = nullptr;
  JobRunner* runner = nullptr;
  AccessControl* access = nullptr;
  ResponseCache* cache = nullptr;
  RequestLimits limits;
  const PoolGauge* pool = nullptr;  // the HTTP threads, for /metrics; may be null
  // More /metrics text for the caller's namespace; may be unset.
  std::function<std::string(const std::string& ns)> namespace_metrics;
  // The audit of a series (GET /api/v1/audit); null: the route answers UNIMPLEMENTED.
  const SourceAudit* audit = nullptr;
};

// Where a route's answers come from: kStore, the store alone (kept in the ResponseCache
// until its DataVersion changes); kLive, also the job runner's state in memory (encoded
// anew for each request). Either way answers carry an ETag and are gzipped on request.
enum class Freshness { kStore, kLive };

// One GET route of the API. Every handler authorizes its caller for `action` (the
// Authorization header, the `namespace` parameter) before anything else.
struct ApiRoute {
  std::string path;     // as docs/openapi.yaml names it, e.g. "/api/v1/jobs/{id}"
  std::string example;  // a path (and query) it serves, for tests over every route
  std::function<void(const httplib::Request&, httplib::Response&)> handler;
  // kRead for the queries; kWrite for the audit of a series, which makes the server list it
  // (as the gRPC JobService.AuditSource).
  Action action = Action::kRead;
};
// The /api/v1 routes, in the one table InstallRoutes installs.
std::vector<ApiRoute> ApiRoutes(const RouteContext& context);

// httplib's regex for an ApiRoute path: each {name} matches one segment,
// "/api/v1/jobs/{id}" -> "/api/v1/jobs/([^/]+)".
std::string RoutePattern(const std::string& path);

// The path of the Prometheus text exposition (ServiceMetrics, the runner's load, the
// store's stats); a caller who may read (any namespace) may scrape it.
inline constexpr char kMetricsPath[] = "/metrics";

// Installs ApiRoutes (each timed into `metrics`), kMetricsPath, a 404 for other /api paths,
// and the static file route on `server`. Without `metrics` (null), no timing and no
// kMetricsPath.
void InstallRoutes(httplib::Server* server, const RouteContext& context, ServiceMetrics* metrics,
                   const std::filesystem::path& web_dir);

}  // namespace anisoscope::server
