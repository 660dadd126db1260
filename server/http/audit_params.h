// The query parameters of GET /api/v1/audit into an AuditSourceRequest: `checkpoints_dir`,
// or a source by the names of CheckpointSource's fields (`hub`, `hub_repos`, `s3`, `glob`,
// `revision`; lowerCamelCase too) with `revisions` a comma-separated list. Depends on
// protobuf only; pure; thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::server {

// INVALID_ARGUMENT naming the parameter for an unknown name, a name given twice, two of
// hub, hub_repos and s3, a bad value or an empty name in `revisions` (query_params.h's rules
// otherwise). Whether the request names exactly one series is the audit's own check.
absl::Status AuditRequestFromParams(const std::multimap<std::string, std::string>& params,
                                    ::anisoscope::v1::AuditSourceRequest* request);

}  // namespace anisoscope::server
