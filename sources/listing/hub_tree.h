// One revision of a Hub repo listed as a step: GET {endpoint}/api/models/{repo}/tree/{rev}
// ?recursive=true (huggingface_hub's list_repo_tree, without expand: the LFS sha256 and size
// are in every entry, and expand=true would cut pages to 50 entries), following
// `Link: <...>; rel="next"` within the endpoint's origin, under the fetcher's bounds. The
// commit is the answer's X-Repo-Commit. Thread-safe; blocks.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/listing_fetcher.h"
#include "sources/listing/remote_listing.h"

namespace anisoscope::listing {

// The step `name` (step `step`) of Hub repo `repo` at `revision` (a branch or a commit):
// its commit and checkpoint files (step_files.h), each with url
// {endpoint}/{repo}/resolve/{commit}/{path}. Errors name the repo and revision: the
// transfer's (401, 404 RevisionNotFound, ...), RESOURCE_EXHAUSTED past a bound,
// INVALID_ARGUMENT for a malformed or hostile listing or a Link to another origin.
absl::StatusOr<RemoteStep> ListHubStep(ListingFetcher& fetcher, absl::string_view endpoint,
                                       absl::string_view repo, absl::string_view revision,
                                       absl::string_view name, int64_t step);

}  // namespace anisoscope::listing
