// The one mapping from absl::Status to grpc::Status (and back, for clients).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace anisoscope {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace anisoscope
