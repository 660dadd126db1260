#include "sources/transfer/http_error.h"

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sources/transfer/url_parts.h"

namespace anisoscope::transfer {
namespace {

constexpr char kHttpStatusPayload[] = "anisoscope.transfer/http-status";
constexpr char kHubErrorCodePayload[] = "anisoscope.transfer/x-error-code";

absl::StatusCode CodeFor(int http_status, absl::string_view hub_error_code) {
  if (hub_error_code == "GatedRepo") return absl::StatusCode::kPermissionDenied;
  switch (http_status) {
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
    case 410:
      return absl::StatusCode::kNotFound;
    case 416:
      return absl::StatusCode::kOutOfRange;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    default:
      break;
  }
  return http_status >= 500 ? absl::StatusCode::kUnavailable
                            : absl::StatusCode::kFailedPrecondition;
}

// What the status means for someone fetching a checkpoint.
absl::string_view Meaning(int http_status, absl::string_view hub_error_code) {
  if (hub_error_code == "GatedRepo") {
    return "the repository is gated: accept its conditions on the Hub, then use a token of that "
           "account";
  }
  if (hub_error_code == "RepoNotFound") return "no such repository, or it is private";
  if (hub_error_code == "RevisionNotFound") return "no such revision (branch, tag or commit)";
  if (hub_error_code == "EntryNotFound") return "no such file at this revision";
  switch (http_status) {
    case 401:
      return "the credentials are missing, wrong or expired";
    case 403:
      return "the credentials do not allow this";
    case 404:
      return "nothing at this URL";
    case 416:
      return "the range asked for is beyond the end of the file";
    case 429:
      return "too many requests";
    default:
      break;
  }
  return "";
}

}  // namespace

absl::string_view ReasonPhrase(int http_status) {
  switch (http_status) {
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 410:
      return "Gone";
    case 416:
      return "Range Not Satisfiable";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

std::string SanitizedErrorCode(absl::string_view code) {
  std::string kept;
  for (char c : code) {
    if (kept.size() == 64) break;
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
      kept.push_back(c);
    }
  }
  return kept;
}

absl::Status HttpStatusError(absl::string_view method, absl::string_view url, int http_status,
                             absl::string_view hub_error_code, absl::string_view after) {
  const std::string code = SanitizedErrorCode(hub_error_code);
  std::string message = absl::StrCat(method, " ", UrlForMessages(url), ": HTTP ", http_status);
  if (const absl::string_view reason = ReasonPhrase(http_status); !reason.empty()) {
    absl::StrAppend(&message, " ", reason);
  }
  if (!code.empty()) absl::StrAppend(&message, " (X-Error-Code ", code, ")");
  if (const absl::string_view meaning = Meaning(http_status, code); !meaning.empty()) {
    absl::StrAppend(&message, ": ", meaning);
  }
  if (!after.empty()) absl::StrAppend(&message, ", ", after);
  absl::Status status(CodeFor(http_status, code), message);
  status.SetPayload(kHttpStatusPayload, absl::Cord(absl::StrCat(http_status)));
  if (!code.empty()) status.SetPayload(kHubErrorCodePayload, absl::Cord(code));
  return status;
}

std::optional<int> HttpStatusOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kHttpStatusPayload);
  int http_status = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &http_status)) {
    return std::nullopt;
  }
  return http_status;
}

std::optional<std::string> HubErrorCodeOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kHubErrorCodePayload);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

}  // namespace anisoscope::transfer
