// Rendering of remote sources for the CLI: `audit`'s answer (a table for people, the HTTP
// API's JSON for tools) and a stored step's origin (`runs`, `status`). Pure functions; each
// returns the complete text, ending with a newline (OriginText: one cell, no newline).
#pragma once

#include <string>

#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::client {

// A caption (what was listed), one row per step: STEP NAME REVISION COMMIT FILES SIZE
// SAME AS (the commit shortened to 12 hex digits; SAME AS: the earlier step with the same
// weights), then "problems:" and "names without a step:" blocks when there are any, and a
// closing line: steps, bytes in all, listing requests, seconds, "no weight byte read".
std::string AuditTable(const v1::AuditSourceResponse& response);
// The response as one object of the protobuf JSON mapping (as GET /api/v1/audit answers).
std::string AuditJson(const v1::AuditSourceResponse& response);

// "hub:ORG/NAME@BRANCH (commit 0123456789ab)" or "s3://BUCKET@PREFIX/"; empty for a step
// read from a folder (no revision and no commit).
std::string OriginText(const std::string& source, const std::string& revision,
                       const std::string& commit);

// The first 12 characters of a commit id (all of a shorter one).
std::string ShortCommit(const std::string& commit);

}  // namespace anisoscope::client
