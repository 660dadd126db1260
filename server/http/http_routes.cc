#include "server/http/http_routes.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <iterator>
#include <map>
#include <regex>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/status_macros.h"
#include "server/http/audit_params.h"
#include "server/http/encoded_response.h"
#include "server/http/http_json.h"
#include "server/http/query_params.h"
#include "server/http/static_files.h"
#include "server/monitoring/query_timing.h"
#include "server/queries/derived_queries.h"
#include "server/queries/queries.h"

namespace anisoscope::server {
namespace {

namespace fs = std::filesystem;

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
                                           std::multimap<std::string, std::string>* params,
                                           Action action = Action::kRead) {
  Credentials credentials;
  credentials.authorization = req.get_header_value("Authorization");
  const auto [first, last] = params->equal_range(kNamespaceParam);
  if (std::distance(first, last) > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", kNamespaceParam, "' is given twice"));
  }
  if (first != last) credentials.ns = first->second;
  params->erase(kNamespaceParam);
  return access.Authorize(credentials, action);
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

// The request of a route from its query parameters: AuditSourceRequest's source from its own
// parameters (audit_params.h), every other request field by field (query_params.h).
template <typename Request>
absl::Status RequestFromParams(const std::multimap<std::string, std::string>& params,
                               Request* request) {
  if constexpr (std::is_same_v<Request, ::anisoscope::v1::AuditSourceRequest>) {
    return AuditRequestFromParams(params, request);
  } else {
    return MessageFromParams(params, request);
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
    const std::string& path_field = "", Action action = Action::kRead) {
  return [context, freshness, core = std::move(core), path_field, action](
             const httplib::Request& req, httplib::Response& res) {
    std::multimap<std::string, std::string> params(req.params.begin(), req.params.end());
    const absl::StatusOr<Principal> caller =
        AuthorizeRequest(*context.access, req, &params, action);
    if (!caller.ok()) return WriteError(caller.status(), res);
    // The answer to the parameters as given: parsed into the request, then the core.
    const auto body = [&]() -> absl::StatusOr<std::string> {
      Request request;
      RETURN_IF_ERROR(RequestFromParams(params, &request));
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
      {"/api/v1/audit", "/api/v1/audit?checkpoints_dir=/data/r",
       ApiHandler<AuditSourceRequest, AuditSourceResponse>(
           context, kLive,
           [audit = context.audit](const string& ns, const AuditSourceRequest& r)
               -> absl::StatusOr<AuditSourceResponse> {
             if (audit == nullptr) {
               return absl::UnimplementedError("this server audits no series over HTTP");
             }
             return audit->Audit(r, ns, "http");
           },
           "", Action::kWrite),
       Action::kWrite},
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
    ServeStaticFile(web_dir, req, res);
  });
  server->set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("http {} {} -> {}", req.method, req.path, res.status);
  });
}

}  // namespace anisoscope::server
