#include "server/http/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

#include "absl/strings/match.h"
#include "common/host_port.h"

namespace anisoscope::server {
namespace {

bool IsLoopbackV4(const std::string& host) {
  in_addr address{};
  if (inet_pton(AF_INET, host.c_str(), &address) != 1) return false;
  return (ntohl(address.s_addr) >> 24) == 127;
}

bool IsLoopbackV6(const std::string& host) {
  in6_addr address{};
  if (inet_pton(AF_INET6, host.c_str(), &address) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&address)) return true;
  return IN6_IS_ADDR_V4MAPPED(&address) && address.s6_addr[12] == 127;
}

// The host of HOST:PORT or [IPV6]:PORT as ParseHostPort reads it; of a HOST, [IPV6] or bare
// IPV6 without a port (an HTTP Host header may leave the port out), that text itself.
std::string HostOf(absl::string_view host_port) {
  if (absl::StatusOr<HostPort> parsed = ParseHostPort(host_port); parsed.ok()) {
    return parsed->host;
  }
  if (host_port.size() >= 2 && host_port.front() == '[' && host_port.back() == ']') {
    return std::string(host_port.substr(1, host_port.size() - 2));
  }
  return std::string(host_port);
}

}  // namespace

bool IsLoopback(absl::string_view host_port) {
  // inet_pton reads up to a NUL: "127.0.0.1\0.evil.example" must not pass as its prefix.
  if (host_port.find('\0') != absl::string_view::npos) return false;
  const std::string host = HostOf(host_port);
  if (absl::StartsWith(host_port, "[")) return IsLoopbackV6(host);  // brackets hold IPv6 only
  return absl::EqualsIgnoreCase(host, "localhost") || IsLoopbackV4(host) || IsLoopbackV6(host);
}

}  // namespace anisoscope::server
