// A CheckpointSource checked and named: the one home of what a well-formed source is (exactly
// one of hub, hub_repos and s3; a repo id, a pattern with one "{}", an s3:// URL; bounded
// revisions and glob) and of how it is written in paths, errors and the store. Pure
// functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "anisoscope/v1/anisoscope.pb.h"

namespace anisoscope::server {

// Bounds on a source's narrowing lists (a caller's request).
inline constexpr int kMaxSourceRevisions = 10000;
inline constexpr int kMaxSourceNameLength = 256;

// OK for a well-formed source; INVALID_ARGUMENT naming the field (`source.hub`,
// `source.revisions`, ...) and the value given otherwise (FAILED_PRECONDITION never).
absl::Status ValidateSource(const ::anisoscope::v1::CheckpointSource& source);

// True when one of hub, hub_repos and s3 is set.
bool HasSource(const ::anisoscope::v1::CheckpointSource& source);

// "hub:ORG/NAME", "hub:ORG/NAME{}" or "s3://BUCKET/PREFIX/" (as given); "" when none is set.
std::string DescribeSource(const ::anisoscope::v1::CheckpointSource& source);

// What a stored step records as its origin (Run.origins): "hub:ORG/NAME" (the step's repo,
// so each repo of a hub_repos suite) or "s3://BUCKET".
std::string StepOriginSource(const ::anisoscope::v1::RemoteCheckpoint& remote);

}  // namespace anisoscope::server
