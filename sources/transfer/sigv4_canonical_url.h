// The URL a SigV4-signed request is sent to, rewritten into the canonical form AWS signs.
// libcurl 7.88 signs the path and query exactly as they appear in the URL, while the server
// signs their canonical form (each name and value percent-encoded per RFC 3986, upper-case
// hex, pairs sorted by name then value). Sending the canonical form makes the two agree, and
// changes no meaning: the order of query pairs and the encoding of unreserved characters
// carry none. (curl 8.x canonicalises the query itself.)
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope::transfer {

// `url` with its path and query canonical: "%xx" escapes upper-cased, unreserved characters
// (A-Z a-z 0-9 - . _ ~) unescaped, every other byte escaped ('/' too inside a query name or
// value; '+' is a literal plus, sent as %2B: callers write a space as %20); query pairs
// sorted, a pair without '=' given an empty value. INVALID_ARGUMENT for a URL libcurl
// cannot parse.
absl::StatusOr<std::string> CanonicalUrlForSigV4(absl::string_view url);

}  // namespace anisoscope::transfer
