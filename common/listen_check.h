// Whether a listen address is taken, asked before a server binds it: gRPC and httplib say
// only that a bind failed, and a busy port is the failure a user can act on (another
// anisoscope-server left running). Both listeners bind without SO_REUSEPORT, so that a
// second server on a busy port fails instead of sharing it; this check names the cause.
// Blocks on name resolution (getaddrinfo) for a host that is not numeric. Thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/host_port.h"

namespace anisoscope {

// UNAVAILABLE "FLAG HOST:PORT: address already in use: is another anisoscope-server
// running?" when a socket already holds `address` (on any address its host resolves to);
// OK otherwise, for port 0, and when the question cannot be answered (the listener's own
// bind then fails or succeeds on its own).
absl::Status CheckAddressFree(const HostPort& address, absl::string_view flag);

}  // namespace anisoscope
