// The protobuf JSON mapping as the HTTP API writes it (lowerCamelCase names, default values
// printed, non-finite doubles as "NaN"/"Infinity"): the one home of its options, used by the
// HTTP answers, the alarm webhook and the CLI's --format json. Thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "absl/status/statusor.h"

namespace anisoscope {

// INTERNAL only if the library cannot print `message` (it always can for our messages).
absl::StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message);

}  // namespace anisoscope
