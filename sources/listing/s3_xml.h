// S3's ListObjectsV2 answer (<ListBucketResult>), parsed with pugixml. Elements are matched
// by local name whatever their namespace (AWS's is
// http://s3.amazonaws.com/doc/2006-03-01/, s3rver's differs). The body is already bounded by
// the GET (ListingBounds::max_page_bytes); pugixml builds no entities beyond XML's five and
// reads no DTD, so a body's parse costs memory proportional to its size. Pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anisoscope::listing {

struct S3Object {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // without quotes
};

struct S3ListPage {
  std::vector<std::string> common_prefixes;  // with delimiter=/: the "folders"
  std::vector<S3Object> objects;             // <Contents>
  bool truncated = false;                    // <IsTruncated>true
  std::string next_continuation_token;       // <NextContinuationToken>
};

// INVALID_ARGUMENT naming `where` for a body that is not XML, not a ListBucketResult, or
// has an object without a key or a numeric size, or a truncated page without a token.
absl::StatusOr<S3ListPage> ParseListObjectsV2(absl::string_view body, absl::string_view where);

}  // namespace anisoscope::listing
