// IsLoopback: whether a host name or address, as given in a listen address or an HTTP Host
// header, names this machine's loopback interface. Parsed exactly, never by prefix.
#pragma once

#include "absl/strings/string_view.h"

namespace anisoscope::server {

// True when `host_port` is HOST or HOST:PORT (PORT: 1-5 decimal digits up to 65535) and HOST
// is "localhost" (any case), a dotted-decimal IPv4 address in 127.0.0.0/8 (four parts, as
// inet_pton reads them: "127.1" and "127.0.0.1.example.com" are not), or the IPv6 loopback
// address (::1 in any spelling, or an IPv4-mapped 127.0.0.0/8 one), bracketed ("[::1]",
// "[::1]:8080") or bare ("::1", without a port).
bool IsLoopback(absl::string_view host_port);

}  // namespace anisoscope::server
