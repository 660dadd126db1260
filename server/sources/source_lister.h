// SourceLister: the server's view of remote series (issue 38 items 1, 5 and 7). It holds the
// operator's endpoints and the Hub's and S3's HttpClients (sources/endpoints: the server's
// --hub-endpoint, --s3-endpoint and credentials, never a caller's) and the server's
// --allow-source, and turns a CheckpointSource into a listing::SourceListing:
//   hub        ListHubBranches (StepSelection{revisions, glob})
//   hub_repos  ListHubSuite (values = revisions, revision, glob over the repo ids: a repo it
//              excludes is never listed)
//   s3         ParseS3Url + ListS3Prefix (StepSelection{revisions, glob})
// Only listings are read (refs, trees, model searches, S3 lists); nothing is downloaded.
// Check is the one home of "may this caller read this source": well-formed
// (ValidateSource), the server's list, then the namespace's (which narrows it).
//
// Thread-safe (immutable; the clients are thread-safe). List blocks on the network, up to
// ListingBounds (pages, entries, parallel requests) and the clients' timeouts.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/sources/source_allow_list.h"
#include "sources/endpoints/source_endpoints.h"
#include "sources/listing/listing_fetcher.h"
#include "sources/listing/remote_listing.h"
#include "sources/transfer/http_client.h"

namespace anisoscope::server {

class SourceLister {
 public:
  struct Options {
    // The operator's endpoints and credentials (sources::ResolveSourceEndpoints).
    sources::SourceEndpoints endpoints;
    // The clients for them (sources::MakeSourceClients); a null one refuses its kind
    // (FAILED_PRECONDITION). Owned by the lister.
    sources::SourceClients clients;
    // --allow-source: which repos and buckets may be read (empty: none).
    SourceAllowList allowed;
    // Bounds on one listing (pages, entries, parallel requests).
    listing::ListingBounds bounds;
  };

  // The endpoints come checked (sources::ResolveSourceEndpoints): nothing fails here today.
  static absl::StatusOr<std::unique_ptr<SourceLister>> Create(Options options);

  // A lister that lists nothing: no client, no allowed source (a server without sources, tests).
  static std::unique_ptr<SourceLister> None();

  // OK when `source` is well-formed (INVALID_ARGUMENT naming the field) and allowed by the
  // server's --allow-source and, when `namespace_sources` is not empty, by them as well
  // (PERMISSION_DENIED naming the source and the list that refused it).
  absl::Status Check(const ::anisoscope::v1::CheckpointSource& source,
                     const SourceAllowList& namespace_sources) const;

  // The steps of `source` (checked by Check first: the caller's duty). The listing's errors
  // name the repo or bucket (UNAUTHENTICATED, NOT_FOUND, DEADLINE_EXCEEDED, ...); a step that
  // cannot be used is one of the listing's problems, not an error. Steps in `skip_steps`
  // (those a followed job has already) are not listed past the refs or prefix: no tree or
  // folder GET, and they are in neither steps nor problems.
  absl::StatusOr<listing::SourceListing> List(const ::anisoscope::v1::CheckpointSource& source,
                                              const std::set<int64_t>& skip_steps = {}) const;

  // "hub:ORG/NAME", "hub:ORG/NAME{}" or "s3://BUCKET/PREFIX/".
  static std::string Describe(const ::anisoscope::v1::CheckpointSource& source);

  // The kind of the steps `source` lists (SOURCE_KIND_HUB for hub and hub_repos).
  static ::anisoscope::v1::SourceKind KindOf(const ::anisoscope::v1::CheckpointSource& source);

  const SourceAllowList& allowed() const { return options_.allowed; }

 private:
  explicit SourceLister(Options options) : options_(std::move(options)) {}

  const Options options_;
};

}  // namespace anisoscope::server
