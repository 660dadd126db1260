#include "server/http/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/listen_check.h"
#include "common/status_macros.h"
#include "server/http/http_connection.h"
#include "server/http/http_json.h"
#include "server/http/http_routes.h"
#include "server/http/http_walls.h"

namespace anisoscope::server {
namespace {

// The answer to a connection refused because every thread is busy and `max_queued` wait.
std::string BusyAnswer() {
  const std::string body = ErrorJson(absl::UnavailableError(
      "every HTTP thread is busy and the most connections wait (--http-threads, "
      "--http-max-queued); try again shortly"));
  return absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
      "Content-Length: ",
      body.size(), "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", body);
}

// Applies `answer`'s headers to `res`; when it answers the request, also its status and
// body, and closes the connection after it when it says so. Whether it answers.
bool Apply(const WallAnswer& answer, httplib::Response& res) {
  for (const auto& [name, value] : answer.headers) res.set_header(name, value);
  if (answer.http_status == 0) return false;
  res.status = answer.http_status;
  if (!answer.error.ok()) {
    res.set_content(ErrorJson(answer.error, answer.http_status), "application/json; charset=utf-8");
  }
  if (answer.close) {
    res.set_header("Connection", "close");
    CloseConnectionAfterAnswer();
  }
  return true;
}

RequestHead HeadOf(const httplib::Request& req) {
  RequestHead head;
  head.method = req.method;
  head.headers.assign(req.headers.begin(), req.headers.end());
  return head;
}

// The walls of http_walls.h, before routing and before a body is read; a request that sends
// "Expect: 100-continue" is answered by them instead of "100 Continue" when they refuse it.
void InstallWalls(httplib::Server& http, const BrowserPolicy& policy) {
  http.set_pre_routing_handler([policy](const httplib::Request& req, httplib::Response& res) {
    return Apply(CheckRequest(HeadOf(req), policy), res)
               ? httplib::Server::HandlerResponse::Handled
               : httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_expect_100_continue_handler(
      [policy](const httplib::Request& req, httplib::Response& res) {
        const WallAnswer answer = CheckRequest(HeadOf(req), policy);
        if (answer.http_status == 0 || answer.error.ok()) return 100;
        Apply(answer, res);
        // httplib sends this answer as it is, without counting its body.
        res.set_header("Content-Length", std::to_string(res.body.size()));
        return answer.http_status;
      });
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const Options& options,
                                                               storage::MetricsStore* store,
                                                               JobRunner* runner,
                                                               AccessControl* access,
                                                               ServiceMetrics* metrics) {
  absl::StatusOr<HostPort> listen_at = ParseHostPort(options.listen);
  if (!listen_at.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen: ", listen_at.status().message()));
  }
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP threads must be >= 0 (0: follow the machine), got ", options.threads));
  }
  const std::string host = listen_at->host;
  int port = listen_at->port;

  if (!(options.read_timeout_seconds > 0) || !(options.write_timeout_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP read and write timeouts must be positive, got ",
                     options.read_timeout_seconds, " and ", options.write_timeout_seconds));
  }
  BrowserPolicy policy;
  policy.loopback_only = access == nullptr || access->mode() == AuthMode::kNone;
  policy.tls = !options.tls_cert.empty();
  for (const std::string& origin : options.cors_origins) {
    absl::StatusOr<std::string> normalized = NormalizeOrigin(origin);
    if (!normalized.ok()) return normalized.status();
    policy.cors_origins.push_back(*std::move(normalized));
  }
  ConnectionLimits limits;
  limits.read_timeout = absl::Seconds(options.read_timeout_seconds);
  limits.write_timeout = absl::Seconds(options.write_timeout_seconds);
  limits.busy_answer = BusyAnswer();

  std::unique_ptr<HttpServer> server(new HttpServer());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("HTTPS wants both a certificate and a key");
  }
  if (options.tls_cert.empty()) {
    server->server_ = std::make_unique<ConnectionServer<httplib::Server>>(std::move(limits));
  } else {
    auto https = std::make_unique<ConnectionServer<httplib::SSLServer>>(
        std::move(limits), options.tls_cert.c_str(), options.tls_key.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load the TLS certificate '", options.tls_cert, "' and key '",
                       options.tls_key, "' (PEM files that belong together)"));
    }
    server->server_ = std::move(https);
  }
  httplib::Server& http = *server->server_;
  const int max_threads = options.threads > 0 ? options.threads : DefaultHttpThreads();
  const int min_threads =
      std::min(max_threads, std::max(4, static_cast<int>(std::thread::hardware_concurrency())));
  http.new_task_queue = [gauge = server->pool_gauge_, min_threads, max_threads,
                         max_queued = options.max_queued] {
    return new HttpThreadPool(min_threads, max_threads, max_queued, gauge);
  };
  // Bodies are refused before they are read (InstallWalls); should one get past, httplib
  // refuses it too.
  http.set_payload_max_length(0);
  InstallWalls(http, policy);
  http.set_tcp_nodelay(true);
  // An idle keep-alive connection holds its thread for up to this long (and Stop waits
  // for it), then the client reconnects.
  http.set_keep_alive_timeout(2);
  http.set_keep_alive_max_count(1000);
  // Connections wait for a thread: close this one after its answer, so that they get one.
  http.set_post_routing_handler(
      [gauge = server->pool_gauge_](const httplib::Request&, httplib::Response& res) {
        if (gauge->waiting.load() > 0) res.set_header("Connection", "close");
      });
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server
  // share a busy port instead of failing. The listening socket is remembered for its
  // backlog (below).
  auto listening = std::make_shared<socket_t>(INVALID_SOCKET);
  http.set_socket_options([listening](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    *listening = sock;
  });
  server->cache_ = std::make_unique<ResponseCache>(options.cache_bytes);
  InstallRoutes(&http,
                {store, runner, access, server->cache_.get(), options.limits,
                 server->pool_gauge_.get(), options.namespace_metrics, options.audit},
                metrics, options.web_dir);

  if (port == 0) {
    port = http.bind_to_any_port(host);
    if (port <= 0) port = 0;
  } else if (!http.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    RETURN_IF_ERROR(CheckAddressFree(*listen_at, "--http-listen"));
    return absl::UnavailableError(absl::StrCat("cannot listen on '", options.listen, "' (HTTP)"));
  }
  // Debian's httplib listens with a backlog of 5: a burst of new connections overflows it
  // and the kernel drops their SYNs, which clients resend only after a second. listen()
  // again on the bound socket raises it to the system's maximum.
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);
  server->port_ = port;
  server->address_ = FormatHostPort(host, port);
  auto ended = std::make_shared<std::atomic<bool>>(false);
  server->thread_ = std::thread([&http, ended] {
    http.listen_after_bind();
    *ended = true;
  });
  // stop() is a no-op until the loop runs: wait for it, so that Stop never misses it.
  while (!http.is_running() && !*ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  spdlog::info("HTTP API on {}; web files from {}", server->address_, options.web_dir);
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace anisoscope::server
