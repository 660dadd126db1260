// How HttpServer serves an accepted connection: in place of httplib's own connection loop,
// under deadlines for the whole request rather than for each read. Debian's cpp-httplib 0.11
// times out each read on its own, so a client that sends one byte a second holds its thread
// for ever, and it keeps a request line or header line without end in memory whole.
//
// ConnectionServer<Base> is an httplib::Server or httplib::SSLServer whose connections are
// served by ServeConnection: one request after another (keep-alive), each parsed and routed
// by httplib's own process_request, over a stream (plain, or TLS on the server's SSL_CTX)
// that holds every connection to ConnectionLimits:
//   - a request's line and headers arrive within `read_timeout` of its first byte (the TLS
//     handshake within `read_timeout` of the accept), or the connection is closed;
//   - at most `max_head_bytes` of them; more closes the connection (unanswered);
//   - an answer is sent within `write_timeout` of its first byte, or the connection is
//     closed;
//   - between requests a connection waits at most the server's keep-alive timeout.
// No request body is ever read (the walls in front of the routes refuse every one, see
// http_walls.h): a handler that refuses a request calls CloseConnectionAfterAnswer, and the
// connection then reads no further request and, for up to a second, drops what the client
// still sends, so that a client still sending a body reads the answer rather than a reset.
//
// A connection the thread pool cannot take (HttpThreadPool::Refusing) is answered
// `busy_answer` at once on the accepting thread, without reading it (over TLS it is closed
// unanswered: a handshake could block).
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/time/time.h"
#include "server/http/http_thread_pool.h"

namespace anisoscope::server {

struct ConnectionLimits {
  absl::Duration read_timeout = absl::Seconds(5);
  absl::Duration write_timeout = absl::Seconds(10);
  size_t max_head_bytes = 64 << 10;
  // The whole HTTP response sent to a connection refused for want of a thread.
  std::string busy_answer;
};

// From a request handler: close this request's connection after its answer (see above).
void CloseConnectionAfterAnswer();

// The connection loop (above): `process` is httplib's process_request for one request,
// `running` is false once the server stops. `tls`: the server's SSL_CTX, or null for plain
// HTTP. Closes `sock`. Returns whether the last request was served.
struct ConnectionSettings {
  ConnectionLimits limits;
  absl::Duration keep_alive;
  size_t max_requests = 1;  // requests on one connection
  SSL_CTX* tls = nullptr;
};
bool ServeConnection(int sock, const ConnectionSettings& settings,
                     const std::function<bool(httplib::Stream&, bool close_connection,
                                              bool& connection_closed)>& process,
                     const std::function<bool()>& running);
// Sends `answer` without waiting (when `tls` is false) and closes `sock`.
void RefuseConnection(int sock, const std::string& answer, bool tls);

template <typename Base>
class ConnectionServer : public Base {
 public:
  template <typename... Args>
  explicit ConnectionServer(ConnectionLimits limits, Args&&... args)
      : Base(std::forward<Args>(args)...), limits_(std::move(limits)) {}

 private:
  static constexpr bool kTls = std::is_base_of_v<httplib::SSLServer, Base>;

  bool process_and_close_socket(socket_t sock) override {
    if (HttpThreadPool::Refusing()) {
      RefuseConnection(sock, limits_.busy_answer, kTls);
      return false;
    }
    ConnectionSettings settings;
    settings.limits = limits_;
    settings.keep_alive = absl::Seconds(this->keep_alive_timeout_sec_);
    settings.max_requests = this->keep_alive_max_count_;
    if constexpr (kTls) settings.tls = this->ssl_context();
    return ServeConnection(
        sock, settings,
        [this](httplib::Stream& stream, bool close_connection, bool& connection_closed) {
          return this->process_request(stream, close_connection, connection_closed, nullptr);
        },
        [this] { return this->svr_sock_ != INVALID_SOCKET; });
  }

  const ConnectionLimits limits_;
};

}  // namespace anisoscope::server
