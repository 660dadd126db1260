// The pieces of the HTTP API that are pure functions (tested alone) and the route table
// HttpServer installs. No I/O except ServeStaticFile's file reads.
#pragma once

#include <google/protobuf/message.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/auth/access_control.h"
#include "server/http/http_thread_pool.h"
#include "server/http/query_params.h"
#include "server/http/response_cache.h"
#include "server/jobs/job_runner.h"
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

// The one mapping from a status code to an HTTP status: 400 INVALID_ARGUMENT, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 FAILED_PRECONDITION, 429
// RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 500 otherwise (200 for OK).
int HttpStatusFor(absl::StatusCode code);
// {"error":{"code":404,"status":"NOT_FOUND","message":"..."}}, the code HttpStatusFor's
// or `http_status` (a status the walls answer: 405, 413).
std::string ErrorJson(const absl::Status& status);
std::string ErrorJson(const absl::Status& status, int http_status);

// The proto JSON mapping of `message` (lowerCamelCase, default values printed).
std::string MessageToJson(const google::protobuf::Message& message);
// MessageToJson of a QuerySeriesResponse, byte for byte, written directly (the library's
// printer takes most of a large series query's time).
std::string SeriesToJson(const ::anisoscope::v1::QuerySeriesResponse& response);

// The Content-Type of a file by its extension (html, js, mjs, css, svg, png, json, map,
// ...); application/octet-stream when unknown.
std::string ContentTypeFor(const std::filesystem::path& file);
// The file under `web_dir` that URL path `url_path` (already percent-decoded) names:
// index.html for "/" and for directories. INVALID_ARGUMENT for a ".." segment, a backslash
// or a NUL; NOT_FOUND when there is no such file; PERMISSION_DENIED when it resolves
// (through symlinks) outside `web_dir`; UNAVAILABLE when `web_dir` does not exist.
absl::StatusOr<std::filesystem::path> ResolveStaticFile(const std::filesystem::path& web_dir,
                                                        const std::string& url_path);

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
};

// Where a route's answers come from: kStore, the store alone (kept in the ResponseCache
// until its DataVersion changes); kLive, also the job runner's state in memory (encoded
// anew for each request). Either way answers carry an ETag and are gzipped on request.
enum class Freshness { kStore, kLive };

// One GET route of the API. Every handler authorizes its caller (Action::kRead: the
// Authorization header, the `namespace` parameter) before anything else.
struct ApiRoute {
  std::string path;     // as docs/openapi.yaml names it, e.g. "/api/v1/jobs/{id}"
  std::string example;  // a path (and query) it serves, for tests over every route
  std::function<void(const httplib::Request&, httplib::Response&)> handler;
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
