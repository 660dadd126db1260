// What the transfers need to know of a URL, read by libcurl's URL parser (CURLU): its origin
// (to decide whether credentials may go there) and a form safe to print.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope::transfer {

// Scheme, host and port: what must all match for a request to receive credentials.
struct UrlOrigin {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; an IPv6 address in brackets
  int port = 0;        // the scheme's default when the URL names none

  bool operator==(const UrlOrigin& other) const {
    return scheme == other.scheme && host == other.host && port == other.port;
  }
  bool operator!=(const UrlOrigin& other) const { return !(*this == other); }
};

// The origin of an absolute http(s) URL; INVALID_ARGUMENT (naming UrlForMessages(url)) for
// anything else.
absl::StatusOr<UrlOrigin> OriginOf(absl::string_view url);

// `url` as errors and logs may show it: scheme, host, port and path, without user info, query
// or fragment (a signed URL carries its signature in the query). "(unparsable URL)" when
// libcurl cannot parse it.
std::string UrlForMessages(absl::string_view url);

}  // namespace anisoscope::transfer
