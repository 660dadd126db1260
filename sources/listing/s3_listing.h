// An S3 (or S3-compatible: MinIO, Ceph, R2, s3rver) prefix listed as a series (issue 38 item
// 1, `--s3 s3://BUCKET/PREFIX/`): each folder under the prefix whose name carries a step
// (step_names.h) is a step, its objects (recursively) the step's files. ListObjectsV2,
// path-style: GET {endpoint}/{bucket}?list-type=2&prefix=...&delimiter=/ for the folders
// (CommonPrefixes), then per folder without delimiter, each paginated by continuation-token;
// the query's pairs are sorted and percent-encoded as SigV4 signs them. The HttpClient
// signs every request (Credentials::aws). No object is downloaded. Thread-safe; blocks.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/listing_fetcher.h"
#include "sources/listing/remote_listing.h"
#include "sources/listing/step_names.h"
#include "sources/transfer/http_client.h"

namespace anisoscope::listing {

struct S3Location {
  std::string bucket;
  std::string prefix;  // "" or ending in '/'
};

// "s3://BUCKET/PREFIX/" (or "s3://BUCKET"): INVALID_ARGUMENT for another scheme, a bucket
// name S3 refuses, or a prefix that does not end in '/' or has an unsafe segment.
absl::StatusOr<S3Location> ParseS3Url(absl::string_view url);

struct S3ListingOptions {
  // The store's base URL (--s3-endpoint; AWS: https://s3.REGION.amazonaws.com), no '/' at
  // the end; buckets are addressed path-style beneath it.
  std::string endpoint;
  // Which folders are listed (by folder name; default all).
  StepSelection selection;
  // ListObjectsV2's max-keys: entries per page (S3 answers at most 1000).
  int max_keys = 1000;
  // Steps already known (a followed job's): their folders are not listed and they are in
  // neither steps nor problems (nor duplicates). They still count toward bounds.max_steps.
  std::set<int64_t> skip_steps;
  ListingBounds bounds;
};

// The step folders of `location`; errors name the bucket and prefix (the transfer's 403
// SignatureDoesNotMatch / AccessDenied, 404 NoSuchBucket; INVALID_ARGUMENT for two folders
// with one step). A folder whose listing is malformed, names a hostile key or a key outside
// the folder, or holds no weights is a problem. Duplicates: duplicates.h (ETag and size,
// single-part uploads only). RESOURCE_EXHAUSTED naming the prefix and the bound for more
// steps than bounds.max_steps (before any folder is listed) or more files than
// bounds.max_total_files.
absl::StatusOr<SourceListing> ListS3Prefix(transfer::HttpClient& client, const S3Location& location,
                                           const S3ListingOptions& options);

}  // namespace anisoscope::listing
