// Query latency for /metrics: a gRPC server interceptor timing every QueryService call,
// and a wrapper timing an HTTP handler. Both record into ServiceMetrics (not owned; it must
// outlive the server they are installed in). Thread-safe.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <memory>
#include <string>

#include "server/monitoring/service_metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace anisoscope::server {

// Times the calls of anisoscope.v1.QueryService, labelled api="grpc" and the method name
// (e.g. "QuerySeries"), from the call's start to its status.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> QueryTimingInterceptor(
    ServiceMetrics* metrics);

// `handler`, recording its time as api="http" and method `route` (e.g. "/api/v1/series").
std::function<void(const httplib::Request&, httplib::Response&)> TimedHttpHandler(
    ServiceMetrics* metrics, std::string route,
    std::function<void(const httplib::Request&, httplib::Response&)> handler);

}  // namespace anisoscope::server
