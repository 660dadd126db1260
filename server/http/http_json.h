// The JSON the HTTP API answers with and the one mapping from an absl::StatusCode to an HTTP
// status. Pure functions (no I/O, no state), tested alone; thread-safe. The route table
// (http_routes.h) and the walls' answers (http_server.cc) send their errors through them.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "absl/status/status.h"
#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::server {

// The one mapping from a status code to an HTTP status: 400 INVALID_ARGUMENT, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 FAILED_PRECONDITION, 429
// RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 500 otherwise (200 for OK).
int HttpStatusFor(absl::StatusCode code);
// {"error":{"code":404,"status":"NOT_FOUND","message":"..."}}, the code HttpStatusFor's
// or `http_status` (a status the walls answer: 405, 413).
std::string ErrorJson(const absl::Status& status);
std::string ErrorJson(const absl::Status& status, int http_status);

// The proto JSON mapping of `message` (lowerCamelCase, default values printed).
std::string MessageToJson(const google::protobuf::Message& message);
// MessageToJson of a QuerySeriesResponse, byte for byte, written directly (the library's
// printer takes most of a large series query's time).
std::string SeriesToJson(const ::anisoscope::v1::QuerySeriesResponse& response);

}  // namespace anisoscope::server
