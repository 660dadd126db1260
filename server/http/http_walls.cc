#include "server/http/http_walls.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/http/loopback.h"

namespace anisoscope::server {
namespace {

std::vector<std::string> Values(const RequestHead& head, absl::string_view name) {
  std::vector<std::string> values;
  for (const auto& [key, value] : head.headers) {
    if (absl::EqualsIgnoreCase(key, name)) values.push_back(value);
  }
  return values;
}

// At most 100 characters of what the caller sent, for an error message.
std::string Quoted(absl::string_view text) {
  return absl::StrCat("'", text.substr(0, 100), text.size() > 100 ? "...'" : "'");
}

bool Listed(const BrowserPolicy& policy, const std::string& origin) {
  return std::find(policy.cors_origins.begin(), policy.cors_origins.end(), origin) !=
         policy.cors_origins.end();
}

WallAnswer Refuse(WallAnswer answer, int http_status, absl::Status error) {
  answer.http_status = http_status;
  answer.error = std::move(error);
  answer.close = true;
  return answer;
}

// Why the request's Host or Origin may not reach a server without tokens; OK when they may.
absl::Status CheckLoopbackCaller(const std::vector<std::string>& hosts,
                                 const std::vector<std::string>& origins, bool tls,
                                 const BrowserPolicy& policy) {
  constexpr char kWhy[] = "this server has no tokens (--auth none), so it answers only ";
  if (hosts.size() != 1 || !IsLoopback(hosts[0])) {
    return absl::PermissionDeniedError(absl::StrCat(
        kWhy, "requests addressed to a loopback name (localhost, 127.0.0.1, [::1]); Host ",
        hosts.empty() ? "is missing" : Quoted(hosts[0]) + " is not one"));
  }
  if (origins.empty()) return absl::OkStatus();
  const absl::StatusOr<std::string> origin =
      origins.size() == 1 ? NormalizeOrigin(origins[0]) : absl::InvalidArgumentError("");
  const std::string own =
      absl::StrCat(tls ? "https://" : "http://", absl::AsciiStrToLower(hosts[0]));
  if (origin.ok() && (*origin == own || Listed(policy, *origin))) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(kWhy, "pages of its own origin or of a --cors-origin; Origin ",
                   Quoted(origins[0]), " is neither"));
}

}  // namespace

absl::StatusOr<std::string> NormalizeOrigin(absl::string_view origin) {
  const std::string lower = absl::AsciiStrToLower(origin);
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("origin ", Quoted(origin), " ", why,
                     " (want scheme://host[:port], e.g. https://dash.example.org:8443)"));
  };
  if (origin == "*") {
    return absl::InvalidArgumentError(
        "origin '*' would let every web page read the API: name each origin instead");
  }
  absl::string_view rest = lower;
  if (absl::StartsWith(rest, "http://")) {
    rest.remove_prefix(7);
  } else if (absl::StartsWith(rest, "https://")) {
    rest.remove_prefix(8);
  } else {
    return invalid("is not http:// or https://");
  }
  // host: a name or IPv4 address, or a bracketed IPv6 address; then :port, digits.
  absl::string_view host = rest;
  absl::string_view port;
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && rest.find(']', colon) == absl::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return invalid("has a port that is not a number");
    }
  }
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host.empty()) return invalid("has no host");
  for (const char c : host) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                    (bracketed ? c == ':' || c == '.' : c == '.' || c == '-');
    if (!ok) return invalid("may hold only a scheme, a host and a port");
  }
  return lower;
}

WallAnswer CheckRequest(const RequestHead& head, const BrowserPolicy& policy) {
  WallAnswer answer;
  const std::vector<std::string> origins = Values(head, "Origin");
  if (policy.loopback_only) {
    absl::Status caller = CheckLoopbackCaller(Values(head, "Host"), origins, policy.tls, policy);
    if (!caller.ok()) return Refuse(std::move(answer), 403, std::move(caller));
  }
  std::string allowed_origin;
  if (!policy.cors_origins.empty()) {
    answer.headers.emplace_back("Vary", "Origin");
    if (origins.size() == 1) {
      const absl::StatusOr<std::string> origin = NormalizeOrigin(origins[0]);
      if (origin.ok() && Listed(policy, *origin)) {
        allowed_origin = *origin;
        answer.headers.emplace_back("Access-Control-Allow-Origin", allowed_origin);
      }
    }
  }

  for (const std::string& length : Values(head, "Content-Length")) {
    const bool zero = !length.empty() &&
                      std::all_of(length.begin(), length.end(), [](char c) { return c == '0'; });
    if (!zero) {
      return Refuse(std::move(answer), 413,
                    absl::ResourceExhaustedError(
                        absl::StrCat("the API is read-only and takes no request body; this request "
                                     "declares Content-Length: ",
                                     Quoted(length))));
    }
  }
  if (const std::vector<std::string> encodings = Values(head, "Transfer-Encoding");
      !encodings.empty()) {
    return Refuse(std::move(answer), 413,
                  absl::ResourceExhaustedError(absl::StrCat(
                      "the API is read-only and takes no request body; this request declares "
                      "Transfer-Encoding: ",
                      Quoted(encodings[0]))));
  }

  if (head.method == "GET" || head.method == "HEAD") return answer;
  const std::vector<std::string> preflight = Values(head, "Access-Control-Request-Method");
  if (head.method == "OPTIONS" && !allowed_origin.empty() && preflight.size() == 1 &&
      (preflight[0] == "GET" || preflight[0] == "HEAD")) {
    answer.http_status = 204;
    answer.headers.emplace_back("Access-Control-Allow-Methods", "GET, HEAD");
    answer.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, If-None-Match");
    answer.headers.emplace_back("Access-Control-Max-Age", "600");
    return answer;
  }
  std::vector<std::string> allow = {"GET", "HEAD"};
  if (!policy.cors_origins.empty()) allow.push_back("OPTIONS");
  answer.headers.emplace_back("Allow", absl::StrJoin(allow, ", "));
  return Refuse(std::move(answer), 405,
                absl::UnimplementedError(absl::StrCat("method ", Quoted(head.method),
                                                      " is not allowed: the API is read-only (",
                                                      absl::StrJoin(allow, ", "), ")")));
}

}  // namespace anisoscope::server
