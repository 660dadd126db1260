#include "server/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace anisoscope::server {
namespace {

bool IsPort(absl::string_view port) {
  if (port.empty() || port.size() > 5) return false;
  int value = 0;
  for (const char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + (c - '0');
  }
  return value <= 65535;
}

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

}  // namespace

bool IsLoopback(absl::string_view host_port) {
  absl::string_view host = host_port;
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    const absl::string_view rest = host.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && IsPort(rest.substr(1)))) return false;
    return IsLoopbackV6(std::string(host.substr(1, close - 1)));
  }
  if (IsLoopbackV6(std::string(host))) return true;  // bare ::1, no port
  const size_t colon = host.rfind(':');
  if (colon != absl::string_view::npos) {
    if (!IsPort(host.substr(colon + 1))) return false;
    host = host.substr(0, colon);
  }
  return absl::EqualsIgnoreCase(host, "localhost") || IsLoopbackV4(std::string(host));
}

}  // namespace anisoscope::server
