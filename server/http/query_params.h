// Query parameters of the HTTP API into the proto request messages of the gRPC API, so
// that both answer from one request type. Depends on protobuf only (fuzzed alone:
// fuzz/query_params_fuzzer.cc). Pure; thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <map>
#include <string>

#include "absl/status/status.h"

namespace anisoscope::server {

// Sets the fields of `message` from query parameters through the proto JSON mapping
// (names snake_case or lowerCamelCase; values as in JSON, numbers given as text). An
// empty value counts as absent. INVALID_ARGUMENT naming the parameter for an unknown name,
// a repeated name, two fields of one oneof or a bad value.
absl::Status MessageFromParams(const std::multimap<std::string, std::string>& params,
                               google::protobuf::Message* message);

}  // namespace anisoscope::server
