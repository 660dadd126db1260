// EncodedResponse: an API answer ready to send many times: its body, a validator (ETag)
// and, when it pays, the body gzipped. The HTTP rules around it are pure functions here
// (conditional requests, RFC 9110 §13.1.2; content coding, §12.5.3), so that they are
// tested alone; http_routes.cc applies them.
#pragma once

#include <string>

namespace anisoscope::server {

struct EncodedResponse {
  std::string body;  // identity coding
  // A weak validator of `body`, W/"<16 hex digits of its XXH3 hash>": weak, because the
  // gzipped and the plain body are the same representation to a client (RFC 9110 §8.8.1).
  std::string etag;
  // `body` gzipped (RFC 1952), or empty when the body is too small for it to pay.
  std::string gzip;
};

// Bodies shorter than this are sent as they are.
inline constexpr size_t kMinGzipBytes = 1024;

// The body with its ETag and, from kMinGzipBytes on and `with_gzip`, its gzip coding (an
// answer sent once passes whether its request accepts gzip; a kept one is gzipped once).
EncodedResponse EncodeResponse(std::string body, bool with_gzip = true);

// True when an If-None-Match header value names `etag` (weak comparison, so W/"x" and "x"
// match) or is "*": the client's copy is current and the answer is 304 Not Modified.
bool IfNoneMatchHits(const std::string& if_none_match, const std::string& etag);

// True when an Accept-Encoding header value accepts gzip: "gzip" or "*" listed with no
// q=0 ("gzip;q=0" refuses it). Empty: false.
bool AcceptsGzip(const std::string& accept_encoding);

// `text` gzipped at the fastest level (JSON still shrinks five- to tenfold); empty when
// zlib fails (the plain body is sent then).
std::string Gzip(const std::string& text);
// The inverse, for the clients of the API in tests and benchmarks: what a gzip stream
// inflates to (as much as inflates when it is damaged).
std::string Gunzip(const std::string& gzip);

}  // namespace anisoscope::server
