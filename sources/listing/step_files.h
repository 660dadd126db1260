// One step's files as a listing gave them (Hub tree entries, S3 objects) to the files a worker
// fetches: every name checked first, so that one hostile name makes the whole step a problem
// rather than a file quietly dropped. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/remote_listing.h"

namespace anisoscope::listing {

// One file entry of a listing, relative to the step.
struct ListedFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // Hub LFS oid, else empty
  std::string etag;    // Hub: sha256 or git oid; S3: ETag without quotes
};

// The checkpoint files (checkpoint_files.h) among `listed`, sorted by path, each with
// url = url_prefix + its percent-encoded path. INVALID_ARGUMENT naming `where` and the
// (escaped) name for any unsafe name (listing_paths.h) or a name listed twice, even one that
// would not be fetched; NOT_FOUND when no weight file is listed.
absl::StatusOr<std::vector<RemoteFile>> StepFiles(const std::vector<ListedFile>& listed,
                                                  absl::string_view url_prefix,
                                                  absl::string_view where);

}  // namespace anisoscope::listing
