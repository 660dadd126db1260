// The HTTP server's walls in front of every route, as a pure function of a request's method
// and headers (HttpServer applies it before routing and before a byte of a body is read;
// tested alone):
//
// - No body. The API is read-only: a request that declares a body (a Content-Length other
//   than 0, or any Transfer-Encoding) is refused 413 at once, its body never read.
// - Methods. GET and HEAD; OPTIONS only as the CORS preflight of a listed origin; anything
//   else is refused 405 with Allow.
// - Browsers. Never `Access-Control-Allow-Origin: *`: a request whose Origin is one of
//   `cors_origins` gets that origin back (and every answer says Vary: Origin when any is
//   listed). On a server without tokens (`loopback_only`), any web page in the user's
//   browser could otherwise read it: a request whose Host is not a loopback name (DNS
//   rebinding) or whose Origin is neither the server's own nor listed is refused 403.
//
// A refused request's connection is closed after the answer (its body, if any, is unread).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope::server {

// Who may read the server from a browser.
struct BrowserPolicy {
  // No tokens (--auth none): requests must name a loopback Host and come from no page or
  // from the server's own origin or a listed one.
  bool loopback_only = false;
  // The server's own origin is https://HOST (else http://HOST), HOST its Host header.
  bool tls = false;
  // --cors-origin, as NormalizeOrigin gives them.
  std::vector<std::string> cors_origins;
};

// What the walls look at: the method and the headers as received (names in any case).
struct RequestHead {
  std::string method;
  std::vector<std::pair<std::string, std::string>> headers;
};

// What the walls answer.
struct WallAnswer {
  // 0: the request goes on to its route. Else it is answered with this status: 204 for a
  // CORS preflight (no body), or 403, 405 or 413 with `error` as its JSON error body.
  int http_status = 0;
  absl::Status error;
  // Headers for the answer, whichever it is (Access-Control-*, Vary, Allow).
  std::vector<std::pair<std::string, std::string>> headers;
  // Close the connection after the answer (every refusal).
  bool close = false;
};

WallAnswer CheckRequest(const RequestHead& head, const BrowserPolicy& policy);

// `origin` as browsers send it: "scheme://host[:port]" with scheme http or https, lowercased.
// INVALID_ARGUMENT naming `origin` for anything else ("*", "null", a path, a user, no host).
absl::StatusOr<std::string> NormalizeOrigin(absl::string_view origin);

}  // namespace anisoscope::server
