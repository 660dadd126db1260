#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http_routes.h"

namespace anisoscope::server {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const Options& options,
                                                               storage::MetricsStore* store,
                                                               JobRunner* runner,
                                                               AccessControl* access,
                                                               ServiceMetrics* metrics) {
  const size_t colon = options.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen address '", options.listen, "' is not HOST:PORT"));
  }
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP threads must be >= 0 (0: follow the machine), got ", options.threads));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]
  }

  std::unique_ptr<HttpServer> server(new HttpServer());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("HTTPS wants both a certificate and a key");
  }
  if (options.tls_cert.empty()) {
    server->server_ = std::make_unique<httplib::Server>();
  } else {
    auto https =
        std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
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
  http.new_task_queue = [gauge = server->pool_gauge_, min_threads, max_threads] {
    return new HttpThreadPool(min_threads, max_threads, gauge);
  };
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
  InstallRoutes(
      &http,
      {store, runner, access, server->cache_.get(), options.limits, server->pool_gauge_.get()},
      metrics, options.web_dir);

  if (port == 0) {
    port = http.bind_to_any_port(host);
    if (port <= 0) port = 0;
  } else if (!http.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", options.listen, "' (HTTP)"));
  }
  // Debian's httplib listens with a backlog of 5: a burst of new connections overflows it
  // and the kernel drops their SYNs, which clients resend only after a second. listen()
  // again on the bound socket raises it to the system's maximum.
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);
  server->port_ = port;
  server->address_ = absl::StrCat(options.listen.substr(0, colon), ":", port);
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
