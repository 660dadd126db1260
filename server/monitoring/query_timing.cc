#include "server/monitoring/query_timing.h"

#include <chrono>
#include <functional>

#include "absl/strings/match.h"

namespace anisoscope::server {
namespace {

using Clock = std::chrono::steady_clock;
namespace experimental = grpc::experimental;

constexpr char kQueryServicePrefix[] = "/anisoscope.v1.QueryService/";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Created when a call starts; records once, when its status is about to be sent.
class QueryTimer : public experimental::Interceptor {
 public:
  QueryTimer(ServiceMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(Clock::now()) {}

  void Intercept(experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->RecordQuery("grpc", method_, SecondsSince(start_));
    }
    methods->Proceed();
  }

 private:
  ServiceMetrics* metrics_;
  std::string method_;
  Clock::time_point start_;
};

class QueryTimerFactory : public experimental::ServerInterceptorFactoryInterface {
 public:
  explicit QueryTimerFactory(ServiceMetrics* metrics) : metrics_(metrics) {}

  experimental::Interceptor* CreateServerInterceptor(experimental::ServerRpcInfo* info) override {
    const std::string method = info->method();
    if (!absl::StartsWith(method, kQueryServicePrefix)) return nullptr;
    return new QueryTimer(metrics_, method.substr(sizeof(kQueryServicePrefix) - 1));
  }

 private:
  ServiceMetrics* metrics_;
};

}  // namespace

std::unique_ptr<experimental::ServerInterceptorFactoryInterface> QueryTimingInterceptor(
    ServiceMetrics* metrics) {
  return std::make_unique<QueryTimerFactory>(metrics);
}

std::function<void(const httplib::Request&, httplib::Response&)> TimedHttpHandler(
    ServiceMetrics* metrics, std::string route,
    std::function<void(const httplib::Request&, httplib::Response&)> handler) {
  return [metrics, route = std::move(route), handler = std::move(handler)](
             const httplib::Request& req, httplib::Response& res) {
    const Clock::time_point start = Clock::now();
    handler(req, res);
    metrics->RecordQuery("http", route, SecondsSince(start));
  };
}

}  // namespace anisoscope::server
