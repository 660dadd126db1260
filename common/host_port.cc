#include "common/host_port.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace anisoscope {
namespace {

absl::Status NotHostPort(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT (", why, ")"));
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  HostPort parsed;
  absl::string_view port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return NotHostPort(address, "no closing ']'");
    parsed.host = std::string(address.substr(1, close - 1));
    const absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return NotHostPort(address, "want :PORT after the ']'");
    }
    port = rest.substr(1);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return NotHostPort(address, "no ':PORT'");
    parsed.host = std::string(address.substr(0, colon));
    if (parsed.host.find(':') != std::string::npos) {
      return NotHostPort(address, "an IPv6 address goes in brackets, [::1]:PORT");
    }
    port = address.substr(colon + 1);
  }
  if (parsed.host.empty()) return NotHostPort(address, "no host");
  if (port.empty() || port.size() > 5) {
    return NotHostPort(address, "the port is 1 to 5 digits");
  }
  int value = 0;
  for (const char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return NotHostPort(address, "the port is 1 to 5 digits");
    }
    value = value * 10 + (c - '0');
  }
  if (value > 65535) return NotHostPort(address, "the port is at most 65535");
  parsed.port = value;
  return parsed;
}

std::string FormatHostPort(absl::string_view host, int port) {
  return host.find(':') == absl::string_view::npos ? absl::StrCat(host, ":", port)
                                                   : absl::StrCat("[", host, "]:", port);
}

}  // namespace anisoscope
