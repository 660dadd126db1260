// HOST:PORT, the one parser of every listen and server address on our command lines
// (--listen, --http-listen, the worker's --server). Syntax only: whether the host resolves
// or the port is free is the socket's question.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope {

struct HostPort {
  // Without brackets: "127.0.0.1", "localhost", "::1".
  std::string host;
  // 0 to 65535; 0 asks the listener to pick a free port.
  int port = 0;
};

// "HOST:PORT" or "[IPV6]:PORT": a non-empty host (an IPv6 address only in brackets, so the
// port is never ambiguous) and a port of 1 to 5 digits, at most 65535. INVALID_ARGUMENT
// naming `address` and what is wrong with it.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// `host`:`port`, the host in brackets when it holds a ':' (an IPv6 address).
std::string FormatHostPort(absl::string_view host, int port);

}  // namespace anisoscope
