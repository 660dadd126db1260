#include "server/http/http_connection.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace anisoscope::server {
namespace {

// Deadlines are on the monotonic clock.
using Clock = std::chrono::steady_clock;
using Time = Clock::time_point;
constexpr Time kNever = Time::max();

Time After(absl::Duration duration) { return Clock::now() + absl::ToChronoNanoseconds(duration); }

thread_local bool t_close_after_answer = false;

// How long a closing connection keeps dropping what its client still sends.
constexpr absl::Duration kLinger = absl::Seconds(1);

// ssize_t results of one non-blocking transfer besides bytes (> 0), end of stream (0) and
// failure (-1): the transfer must wait until the socket is readable or writable.
constexpr ssize_t kWantRead = -2;
constexpr ssize_t kWantWrite = -3;

// Waits until `fd` has one of `events` (or is hung up or failed) or `deadline` passes.
bool WaitFor(int fd, short events, Time deadline) {
  for (;;) {
    const Time now = Clock::now();
    const int64_t left =
        now >= deadline
            ? 0
            : std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left, 3600 * 1000)));
    if (ready > 0) return true;
    if (ready == 0 && Clock::now() >= deadline) return false;
    if (ready < 0 && errno != EINTR) return false;
  }
}

// One connection's socket (and TLS session), read through a buffer, every transfer under
// the current request's deadlines.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  ~ConnectionStream() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  // TLS: the handshake on `ctx`, within the read timeout. Plain (`ctx` null): true.
  bool Handshake(SSL_CTX* ctx) {
    if (ctx == nullptr) return true;
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return false;
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const Time deadline = After(limits_.read_timeout);
    for (;;) {
      ERR_clear_error();
      const int result = SSL_accept(ssl_);
      if (result == 1) {
        handshaken_ = true;
        return true;
      }
      const int error = SSL_get_error(ssl_, result);
      if (error == SSL_ERROR_WANT_READ) {
        if (!WaitFor(fd_, POLLIN, deadline)) return false;
      } else if (error == SSL_ERROR_WANT_WRITE) {
        if (!WaitFor(fd_, POLLOUT, deadline)) return false;
      } else {
        return false;
      }
    }
  }

  // Waits up to `idle` for the next request's first byte; false when none comes, the client
  // closed, or `running` turns false.
  bool WaitForRequest(absl::Duration idle, const std::function<bool()>& running) {
    if (next_ < end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
    const Time deadline = After(idle);
    while (running()) {
      const Time now = Clock::now();
      if (now >= deadline) return false;
      if (WaitFor(fd_, POLLIN, std::min(deadline, now + std::chrono::milliseconds(50)))) {
        return true;
      }
    }
    return false;
  }

  // Starts the deadlines and the head count of one request.
  void BeginRequest() {
    read_deadline_ = After(limits_.read_timeout);
    write_deadline_ = kNever;
    head_bytes_ = 0;
  }

  // Closes the connection; `linger`: first end the answer and drop what the client still
  // sends, for up to kLinger.
  void Close(bool linger) {
    if (handshaken_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // one try: the close_notify, not waiting for the client's
    }
    if (linger) {
      ::shutdown(fd_, SHUT_WR);
      const Time deadline = After(kLinger);
      char sink[16384];
      while (WaitFor(fd_, POLLIN, deadline)) {
        const ssize_t n = ::recv(fd_, sink, sizeof(sink), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      }
    }
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
  }

  bool is_readable() const override {
    return next_ < end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0) ||
           WaitFor(fd_, POLLIN, read_deadline_);
  }
  bool is_writable() const override {
    return WaitFor(fd_, POLLOUT,
                   write_deadline_ == kNever ? After(limits_.write_timeout) : write_deadline_);
  }

  // Whether a transfer failed: the deadline passed, the head is over its bound, the socket
  // failed. The connection is then closed whatever httplib makes of it.
  bool broken() const { return broken_; }

  ssize_t read(char* ptr, size_t size) override {
    if (head_bytes_ >= limits_.max_head_bytes) {
      broken_ = true;
      return -1;
    }
    if (next_ == end_) {
      const ssize_t n = Transfer([&] { return Read(buffer_, sizeof(buffer_)); }, read_deadline_);
      if (n <= 0) return n;
      next_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min({size, end_ - next_, limits_.max_head_bytes - head_bytes_});
    std::memcpy(ptr, buffer_ + next_, n);
    next_ += n;
    head_bytes_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (write_deadline_ == kNever) write_deadline_ = After(limits_.write_timeout);
    return Transfer([&] { return Write(ptr, size); }, write_deadline_);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // `transfer` (Read or Write) until it moves bytes, waiting for the socket until `deadline`:
  // bytes moved, 0 at the end of the stream, -1 on failure or at the deadline.
  template <typename Transferring>
  ssize_t Transfer(const Transferring& transfer, Time deadline) {
    for (;;) {
      const ssize_t n = transfer();
      if (n != kWantRead && n != kWantWrite) {
        broken_ = broken_ || n < 0;
        return n;
      }
      if (!WaitFor(fd_, n == kWantRead ? POLLIN : POLLOUT, deadline)) {
        broken_ = true;
        return -1;
      }
    }
  }

  ssize_t Read(char* data, size_t size) {
    if (ssl_ == nullptr) {
      const ssize_t n = ::recv(fd_, data, size, 0);
      if (n >= 0) return n;
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? kWantRead : -1;
    }
    ERR_clear_error();
    const int n = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    return n > 0 ? n : TlsResult(n);
  }

  ssize_t Write(const char* data, size_t size) {
    if (ssl_ == nullptr) {
      const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? kWantWrite : -1;
    }
    ERR_clear_error();
    const int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    return n > 0 ? n : TlsResult(n);
  }

  ssize_t TlsResult(int result) const {
    switch (SSL_get_error(ssl_, result)) {
      case SSL_ERROR_WANT_READ:
        return kWantRead;
      case SSL_ERROR_WANT_WRITE:
        return kWantWrite;
      case SSL_ERROR_ZERO_RETURN:
        return 0;
      default:
        return -1;
    }
  }

  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    ip.clear();
    port = -1;
    if (get(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
      port = ntohs(v4->sin_port);
    } else if (address.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  const int fd_;
  const ConnectionLimits& limits_;
  SSL* ssl_ = nullptr;
  bool handshaken_ = false;
  Time read_deadline_ = kNever;
  Time write_deadline_ = kNever;
  size_t head_bytes_ = 0;
  bool broken_ = false;
  char buffer_[4096];
  size_t next_ = 0;
  size_t end_ = 0;
};

}  // namespace

void CloseConnectionAfterAnswer() { t_close_after_answer = true; }

bool ServeConnection(int sock, const ConnectionSettings& settings,
                     const std::function<bool(httplib::Stream&, bool close_connection,
                                              bool& connection_closed)>& process,
                     const std::function<bool()>& running) {
  ConnectionStream stream(sock, settings.limits);
  if (!stream.Handshake(settings.tls)) {
    stream.Close(false);
    return false;
  }
  bool served = false;
  for (size_t left = settings.max_requests; left > 0; --left) {
    if (!stream.WaitForRequest(settings.keep_alive, running)) break;
    stream.BeginRequest();
    t_close_after_answer = false;
    bool closed = false;
    served = process(stream, left == 1, closed);
    if (t_close_after_answer) {
      t_close_after_answer = false;
      stream.Close(/*linger=*/true);
      return served;
    }
    if (!served || closed || stream.broken()) break;
  }
  stream.Close(false);
  return served;
}

void RefuseConnection(int sock, const std::string& answer, bool tls) {
  if (!tls) {
    // What the client sent already (up to 64 KiB) is dropped, so that closing sends no
    // reset ahead of the answer when it can.
    char sink[16384];
    for (int i = 0; i < 4 && ::recv(sock, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
    }
    ::send(sock, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(sock, SHUT_WR);
  }
  ::close(sock);
}

}  // namespace anisoscope::server
