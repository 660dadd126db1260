#include "server/http/http_routes.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <regex>
#include <sstream>
#include <system_error>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json_text.h"
#include "common/proto_json.h"
#include "common/status_macros.h"
#include "server/http/encoded_response.h"
#include "server/monitoring/query_timing.h"
#include "server/queries/derived_queries.h"
#include "server/queries/queries.h"

namespace anisoscope::server {
namespace {

namespace fs = std::filesystem;
namespace protobuf = ::google::protobuf;

constexpr char kJsonType[] = "application/json; charset=utf-8";

void WriteError(const absl::Status& status, httplib::Response& res) {
  res.status = HttpStatusFor(status.code());
  if (status.code() == absl::StatusCode::kUnauthenticated) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"anisoscope\"");
  }
  res.set_content(ErrorJson(status), kJsonType);
}

// The caller of an API request: its Authorization header and `namespace` parameter (taken
// out of `params`).
absl::StatusOr<Principal> AuthorizeRequest(AccessControl& access, const httplib::Request& req,
                                           std::multimap<std::string, std::string>* params) {
  Credentials credentials;
  credentials.authorization = req.get_header_value("Authorization");
  const auto [first, last] = params->equal_range(kNamespaceParam);
  if (std::distance(first, last) > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", kNamespaceParam, "' is given twice"));
  }
  if (first != last) credentials.ns = first->second;
  params->erase(kNamespaceParam);
  return access.Authorize(credentials, Action::kRead);
}

// Sends `encoded`: 304 when the client's copy (If-None-Match) is current, gzipped when the
// client accepts it, with the validator and "revalidate every time" either way.
void WriteEncoded(const EncodedResponse& encoded, const httplib::Request& req,
                  httplib::Response& res) {
  res.set_header("ETag", encoded.etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Vary", "Accept-Encoding");
  if (IfNoneMatchHits(req.get_header_value("If-None-Match"), encoded.etag)) {
    res.status = 304;
    return;
  }
  if (!encoded.gzip.empty() && AcceptsGzip(req.get_header_value("Accept-Encoding"))) {
    res.set_header("Content-Encoding", "gzip");
    res.set_content(encoded.gzip, kJsonType);
  } else {
    res.set_content(encoded.body, kJsonType);
  }
}

template <typename Response>
std::string ResponseJson(const Response& response) {
  if constexpr (std::is_same_v<Response, ::anisoscope::v1::QuerySeriesResponse>) {
    return SeriesToJson(response);
  } else {
    return MessageToJson(response);
  }
}

// A GET handler for one API call: credentials -> caller; parameters (and path captures) ->
// Request -> core in the caller's namespace -> Response as JSON, kept in the context's
// cache until the store changes when the route's answers come from the store alone.
// `path_field` names the request field set from the first capture.
template <typename Request, typename Response>
httplib::Server::Handler ApiHandler(
    const RouteContext& context, Freshness freshness,
    std::function<absl::StatusOr<Response>(const std::string& ns, const Request&)> core,
    const std::string& path_field = "") {
  return [context, freshness, core = std::move(core), path_field](const httplib::Request& req,
                                                                  httplib::Response& res) {
    std::multimap<std::string, std::string> params(req.params.begin(), req.params.end());
    const absl::StatusOr<Principal> caller = AuthorizeRequest(*context.access, req, &params);
    if (!caller.ok()) return WriteError(caller.status(), res);
    // The answer to the parameters as given: parsed into the request, then the core.
    const auto body = [&]() -> absl::StatusOr<std::string> {
      Request request;
      RETURN_IF_ERROR(MessageFromParams(params, &request));
      if (!path_field.empty()) {
        RETURN_IF_ERROR(MessageFromParams({{path_field, req.matches[1].str()}}, &request));
      }
      ASSIGN_OR_RETURN(const Response response, core(caller->ns, request));
      return ResponseJson(response);
    };
    ResponseCache::Answer answer;
    if (freshness == Freshness::kStore && context.cache != nullptr) {
      const absl::StatusOr<int64_t> version = context.store->DataVersion();
      if (!version.ok()) return WriteError(version.status(), res);
      // Keyed by the parameters as given (length-prefixed, so no two sets share a key), so
      // that a kept answer is sent without parsing them again.
      std::string key = absl::StrCat(req.matches[0].str().size(), ":", req.matches[0].str(),
                                     caller->ns.size(), ":", caller->ns);
      for (const auto& [name, value] : params) {
        absl::StrAppend(&key, name.size(), ":", name, value.size(), ":", value);
      }
      answer = context.cache->GetOrCompute(key, *version, body);
    } else if (absl::StatusOr<std::string> json = body(); json.ok()) {
      answer = std::make_shared<const EncodedResponse>(EncodeResponse(
          std::move(json).value(), AcceptsGzip(req.get_header_value("Accept-Encoding"))));
    } else {
      answer = json.status();
    }
    if (!answer.ok()) return WriteError(answer.status(), res);
    WriteEncoded(**answer, req, res);
  };
}

void ServeStatic(const fs::path& web_dir, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<fs::path> file = ResolveStaticFile(web_dir, req.path);
  if (!file.ok()) {
    res.status = HttpStatusFor(file.status().code());
    res.set_content(std::string(file.status().message()) + "\n", "text/plain; charset=utf-8");
    return;
  }
  std::ifstream in(*file, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  if (!in) {
    res.status = 500;
    res.set_content(absl::StrCat("cannot read ", file->string(), "\n"), "text/plain");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_content(content.str(), ContentTypeFor(*file));
}

// The Prometheus exposition: the counts of `metrics`, the runner's load, the store's stats
// and the HTTP threads.
void ServeMetrics(const RouteContext& context, const ServiceMetrics& metrics,
                  const httplib::Request& req, httplib::Response& res) {
  // `namespace` picks whose runs the alarm gauges show (as for every other read).
  std::multimap<std::string, std::string> params(req.params.begin(), req.params.end());
  const absl::StatusOr<Principal> caller = AuthorizeRequest(*context.access, req, &params);
  if (!caller.ok()) return WriteError(caller.status(), res);
  const absl::StatusOr<storage::StoreStats> stats = context.store->Stats();
  if (!stats.ok()) return WriteError(stats.status(), res);
  const JobRunner::Load load = context.runner->CurrentLoad();
  ServiceMetrics::Gauges gauges;
  gauges.jobs_by_state = stats->jobs_by_state;
  gauges.database_bytes = stats->database_bytes;
  gauges.queued_steps = load.queued_steps;
  gauges.active_leases = load.active_leases;
  gauges.workers = load.workers;
  if (context.pool != nullptr) {
    gauges.http_threads = context.pool->threads.load();
    gauges.http_busy_threads = context.pool->busy.load();
    gauges.http_waiting_connections = context.pool->waiting.load();
    gauges.http_refused_connections = context.pool->refused.load();
  }
  std::string text = metrics.Exposition(gauges);
  if (context.namespace_metrics) text += context.namespace_metrics(caller->ns);
  res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status) {
  return ErrorJson(status, HttpStatusFor(status.code()));
}

std::string ErrorJson(const absl::Status& status, int http_status) {
  return absl::StrCat("{\"error\":{\"code\":", http_status,
                      ",\"status\":", JsonQuote(absl::StatusCodeToString(status.code())),
                      ",\"message\":", JsonQuote(std::string(status.message())), "}}");
}

std::string MessageToJson(const protobuf::Message& message) {
  absl::StatusOr<std::string> json = ProtoToJson(message);
  return json.ok() ? *std::move(json) : ErrorJson(json.status());
}

std::string SeriesToJson(const ::anisoscope::v1::QuerySeriesResponse& response) {
  const auto plain = [](const std::string& text) {
    for (const char c : text) {
      if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') return false;
    }
    return true;
  };
  if (!plain(response.probe_id()) || !plain(response.metric())) return MessageToJson(response);
  std::string json = absl::StrCat("{\"probeId\":\"", response.probe_id(), "\",\"metric\":\"",
                                  response.metric(), "\",\"points\":[");
  json.reserve(json.size() + 64 * static_cast<size_t>(response.points_size()));
  bool first = true;
  for (const ::anisoscope::v1::SeriesPoint& point : response.points()) {
    absl::StrAppend(&json, first ? "" : ",", "{\"step\":\"", point.step(),
                    "\",\"layer\":", point.layer(), ",\"head\":", point.head(),
                    ",\"value\":", JsonDoubleText(point.value()), "}");
    first = false;
  }
  absl::StrAppend(&json, "],\"downsampled\":", response.downsampled() ? "true" : "false", "}");
  return json;
}

std::string ContentTypeFor(const fs::path& file) {
  static const std::map<std::string, std::string>* const kTypes =
      new std::map<std::string, std::string>{
          {".html", "text/html; charset=utf-8"},
          {".js", "text/javascript; charset=utf-8"},
          {".mjs", "text/javascript; charset=utf-8"},
          {".css", "text/css; charset=utf-8"},
          {".svg", "image/svg+xml"},
          {".png", "image/png"},
          {".json", "application/json; charset=utf-8"},
          {".map", "application/json; charset=utf-8"},
          {".txt", "text/plain; charset=utf-8"},
          {".ico", "image/x-icon"},
          {".woff2", "font/woff2"},
      };
  auto it = kTypes->find(absl::AsciiStrToLower(file.extension().string()));
  return it == kTypes->end() ? "application/octet-stream" : it->second;
}

absl::StatusOr<fs::path> ResolveStaticFile(const fs::path& web_dir, const std::string& url_path) {
  std::error_code error;
  if (!fs::is_directory(web_dir, error)) {
    return absl::UnavailableError(absl::StrCat(
        "the dashboard assets are not built: '", web_dir.string(),
        "' does not exist (run scripts/setup.sh, or pass --web-dir); the API under /api/v1/ "
        "works without them"));
  }
  if (url_path.find('\\') != std::string::npos || url_path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad path '", url_path, "'"));
  }
  fs::path relative;
  for (absl::string_view segment : absl::StrSplit(url_path, '/', absl::SkipEmpty())) {
    if (segment == "..") {
      return absl::InvalidArgumentError(absl::StrCat("path '", url_path, "' may not contain '..'"));
    }
    if (segment == ".") continue;
    relative /= std::string(segment);
  }
  const fs::path root = fs::canonical(web_dir, error);
  if (error) return absl::UnavailableError(absl::StrCat("cannot read '", web_dir.string(), "'"));
  fs::path file = root / relative;
  if (fs::is_directory(file, error)) file /= "index.html";
  const fs::path resolved = fs::canonical(file, error);
  if (error || !fs::is_regular_file(resolved, error)) {
    return absl::NotFoundError(absl::StrCat("not found: ", url_path));
  }
  // Symlinks inside web_dir must not lead outside it.
  const auto [root_end, unused] =
      std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (root_end != root.end()) {
    return absl::PermissionDeniedError(absl::StrCat("not served: ", url_path));
  }
  return resolved;
}

std::string RoutePattern(const std::string& path) {
  return std::regex_replace(path, std::regex(R"(\{[a-z_]+\})"), "([^/]+)");
}

std::vector<ApiRoute> ApiRoutes(const RouteContext& context) {
  using namespace ::anisoscope::v1;  // NOLINT: the message names, for the table below
  using std::string;
  storage::MetricsStore* const store = context.store;
  JobRunner* const runner = context.runner;
  constexpr Freshness kStore = Freshness::kStore;
  constexpr Freshness kLive = Freshness::kLive;
  return {
      {"/api/v1/runs", "/api/v1/runs",
       ApiHandler<ListRunsRequest, ListRunsResponse>(
           context, kStore,
           [store](const string& ns, const ListRunsRequest& r) {
             return queries::ListRuns(*store, ns, r);
           })},
      {"/api/v1/series", "/api/v1/series?run=r&metric=qk_mean_cosine",
       ApiHandler<QuerySeriesRequest, QuerySeriesResponse>(
           context, kStore,
           [store, limits = context.limits](const string& ns, const QuerySeriesRequest& r) {
             return queries::QuerySeries(*store, ns, r, limits);
           })},
      {"/api/v1/vectors", "/api/v1/vectors?run=r&kind=q_mean",
       ApiHandler<QueryVectorsRequest, QueryVectorsResponse>(
           context, kStore,
           [store, limits = context.limits](const string& ns, const QueryVectorsRequest& r) {
             return queries::QueryVectors(*store, ns, r, limits);
           })},
      {"/api/v1/trajectory", "/api/v1/trajectory?run=r",
       ApiHandler<QueryTrajectoryRequest, QueryTrajectoryResponse>(
           context, kStore,
           [store, limits = context.limits](const string& ns, const QueryTrajectoryRequest& r) {
             return queries::QueryTrajectory(*store, ns, r, limits);
           })},
      {"/api/v1/token_cloud", "/api/v1/token_cloud?run=r&layer=0&head=0&basis=union",
       ApiHandler<QueryTokenCloudRequest, QueryTokenCloudResponse>(
           context, kStore,
           [store, limits = context.limits](const string& ns, const QueryTokenCloudRequest& r) {
             return queries::QueryTokenCloud(*store, ns, r, limits);
           })},
      {"/api/v1/correlation", "/api/v1/correlation?run=r",
       ApiHandler<QueryCorrelationRequest, QueryCorrelationResponse>(
           context, kStore,
           [store, limits = context.limits](const string& ns, const QueryCorrelationRequest& r) {
             return queries::QueryCorrelation(*store, ns, r, limits);
           })},
      {"/api/v1/isotropic_baseline", "/api/v1/isotropic_baseline?dimension=64",
       ApiHandler<QueryIsotropicBaselineRequest, QueryIsotropicBaselineResponse>(
           context, kStore,
           [](const string& /*ns*/, const QueryIsotropicBaselineRequest& r) {
             return queries::QueryIsotropicBaseline(r);
           })},
      {"/api/v1/metrics-catalog", "/api/v1/metrics-catalog",
       ApiHandler<ListMetricsRequest, ListMetricsResponse>(
           context, kStore,
           [](const string& /*ns*/, const ListMetricsRequest& r) {
             return absl::StatusOr<ListMetricsResponse>(queries::ListMetrics(r));
           })},
      {"/api/v1/alarms", "/api/v1/alarms?run=r&state=firing",
       ApiHandler<ListAlarmsRequest, ListAlarmsResponse>(
           context, kStore,
           [store](const string& ns, const ListAlarmsRequest& r) {
             return queries::ListAlarms(*store, ns, r);
           })},
      {"/api/v1/jobs", "/api/v1/jobs",
       ApiHandler<ListJobsRequest, ListJobsResponse>(
           context, kLive,
           [runner](const string& ns, const ListJobsRequest& r) {
             return queries::ListJobs(*runner, ns, r);
           })},
      {"/api/v1/jobs/{id}", "/api/v1/jobs/1",
       ApiHandler<GetJobRequest, Job>(
           context, kLive,
           [runner](const string& ns, const GetJobRequest& r) {
             return queries::GetJob(*runner, ns, r);
           },
           "id")},
  };
}

void InstallRoutes(httplib::Server* server, const RouteContext& context, ServiceMetrics* metrics,
                   const fs::path& web_dir) {
  for (ApiRoute& route : ApiRoutes(context)) {
    server->Get(RoutePattern(route.path),
                metrics == nullptr
                    ? std::move(route.handler)
                    : TimedHttpHandler(metrics, route.path, std::move(route.handler)));
  }
  if (metrics != nullptr) {
    server->Get(kMetricsPath, [=](const httplib::Request& req, httplib::Response& res) {
      ServeMetrics(context, *metrics, req, res);
    });
  }
  server->Get(R"(/api(/.*)?)", [](const httplib::Request& req, httplib::Response& res) {
    WriteError(absl::NotFoundError(absl::StrCat("no such endpoint: GET ", req.path)), res);
  });
  server->Get(R"(/.*)", [web_dir](const httplib::Request& req, httplib::Response& res) {
    ServeStatic(web_dir, req, res);
  });
  server->set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("http {} {} -> {}", req.method, req.path, res.status);
  });
}

}  // namespace anisoscope::server
