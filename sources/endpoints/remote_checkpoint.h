// A listed remote step on the wire (v1::RemoteCheckpoint, in a WorkUnit) and back.
//
// The server sends names only: the repo or bucket, the revision, the commit and each file's
// path, size, sha256 and etag. The worker rebuilds every URL from its OWN endpoints
// (SourceEndpoints, the operator's flags), so no server, tenant or listing can make a worker
// fetch an address of its choosing, and checks every name again as a listing's
// (listing::CheckListedPath, the cache's rules) before anything touches the disk.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "sources/endpoints/source_endpoints.h"
#include "sources/listing/remote_listing.h"

namespace anisoscope::sources {

// Files a RemoteCheckpoint may carry (a listing holds at most ListingBounds::max_entries).
inline constexpr int kMaxRemoteCheckpointFiles = 100000;

// `step` as the server sends it, urls dropped (server side).
v1::RemoteCheckpoint ToRemoteCheckpoint(const listing::RemoteStep& step, v1::SourceKind kind);

// The step a worker fetches (worker side): each file's url is built from `endpoints`
// (listing::HubFileUrlPrefix / S3FileUrlPrefix), never from anything the server sent.
// INVALID_ARGUMENT naming the field ("RemoteCheckpoint.repo", "RemoteCheckpoint.files[2].path")
// for an unset or unknown kind, a bad repo or bucket, a Hub step without a 40-hex commit (or
// an S3 step with one), a bad revision, no files or too many, an unsafe or repeated path, a
// sha256 that is not 64 hex digits, an etag the cache refuses.
absl::StatusOr<listing::RemoteStep> FromRemoteCheckpoint(const v1::RemoteCheckpoint& remote,
                                                         int64_t step,
                                                         const SourceEndpoints& endpoints);

// "hub:ORG/NAME@REVISION" or "s3://BUCKET/PREFIX/step/": how a unit names a remote step in
// logs and errors (names only, escaped).
std::string DescribeRemoteCheckpoint(const v1::RemoteCheckpoint& remote);

}  // namespace anisoscope::sources
