#include "server/http/http_json.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "common/proto_json.h"

namespace anisoscope::server {

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status) {
  return ErrorJson(status, HttpStatusFor(status.code()));
}

std::string ErrorJson(const absl::Status& status, int http_status) {
  return absl::StrCat("{\"error\":{\"code\":", http_status,
                      ",\"status\":", JsonQuote(absl::StatusCodeToString(status.code())),
                      ",\"message\":", JsonQuote(std::string(status.message())), "}}");
}

std::string MessageToJson(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ProtoToJson(message);
  return json.ok() ? *std::move(json) : ErrorJson(json.status());
}

std::string SeriesToJson(const ::anisoscope::v1::QuerySeriesResponse& response) {
  const auto plain = [](const std::string& text) {
    for (const char c : text) {
      if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') return false;
    }
    return true;
  };
  if (!plain(response.probe_id()) || !plain(response.metric())) return MessageToJson(response);
  std::string json = absl::StrCat("{\"probeId\":\"", response.probe_id(), "\",\"metric\":\"",
                                  response.metric(), "\",\"points\":[");
  json.reserve(json.size() + 64 * static_cast<size_t>(response.points_size()));
  bool first = true;
  for (const ::anisoscope::v1::SeriesPoint& point : response.points()) {
    absl::StrAppend(&json, first ? "" : ",", "{\"step\":\"", point.step(),
                    "\",\"layer\":", point.layer(), ",\"head\":", point.head(),
                    ",\"value\":", JsonDoubleText(point.value()), "}");
    first = false;
  }
  absl::StrAppend(&json, "],\"downsampled\":", response.downsampled() ? "true" : "false", "}");
  return json;
}

}  // namespace anisoscope::server
