// A Hub series listed (issue 38 item 1): `--hub ORG/NAME` (a step per branch) and
// `--hub-repos PATTERN` (a repo per step, e.g. google/multiberts-seed_0-step_{}k). Only
// listings are read (refs, trees, model searches); no file is downloaded. Thread-safe;
// every call blocks, running up to ListingBounds::parallel_requests GETs at once.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/listing_fetcher.h"
#include "sources/listing/remote_listing.h"
#include "sources/listing/step_names.h"
#include "sources/transfer/http_client.h"

namespace anisoscope::listing {

struct HubListingOptions {
  // The Hub's base URL (--hub-endpoint, HF_ENDPOINT), without a trailing '/'.
  std::string endpoint = "https://huggingface.co";
  // --revisions A,B or a glob: which branches are listed (default all).
  StepSelection selection;
  // Steps already known (a followed job's): their trees are not fetched and they are in
  // neither steps nor problems (nor duplicates). They still count toward bounds.max_steps.
  std::set<int64_t> skip_steps;
  ListingBounds bounds;
};

// Every branch of `repo` ("ORG/NAME") whose name carries a step (step_names.h), each listed
// at the commit GET /api/models/{repo}/refs gave it; other branches (main, ...) go to
// without_step. A step whose tree cannot be used (missing, malformed, a hostile name, no
// weights) is a problem, the others are listed. Errors, naming the repo: INVALID_ARGUMENT
// for a bad repo id or two branches with one step; the transfer's for the refs (401
// UNAUTHENTICATED without a token for a private or missing repo, 404 NOT_FOUND, ...) and
// for a step's tree when credentials or the server fail.
absl::StatusOr<SourceListing> ListHubBranches(transfer::HttpClient& client, absl::string_view repo,
                                              const HubListingOptions& options);

struct HubSuiteOptions {
  std::string endpoint = "https://huggingface.co";
  // The values put for "{}" ("20", "40", ...): exactly these repos. Empty: the repos are
  // found by GET /api/models?author=ORG&search=PREFIX (paginated), PREFIX being the name
  // up to "{}", and those matching the pattern are kept.
  std::vector<std::string> values;
  // The revision of each repo that is its step.
  std::string revision = "main";
  // fnmatch(3) over the repo id ("ORG/NAME"); empty: all. A repo it excludes is never
  // listed and is in none of steps, problems and without_step.
  std::string glob;
  // As HubListingOptions::skip_steps.
  std::set<int64_t> skip_steps;
  ListingBounds bounds;
};

// The repos matching `pattern` ("ORG/NAME" with one "{}" in NAME), one step each, its step
// parsed from the repo's NAME (step_names.h); a repo whose NAME carries none goes to
// without_step, a repo given by `values` that is missing or unreadable is a problem.
// INVALID_ARGUMENT for a pattern without exactly one "{}" or two repos with one step.
// Both listings: RESOURCE_EXHAUSTED naming the source and the bound for more steps than
// bounds.max_steps (before any tree is fetched) or more files than bounds.max_total_files.
absl::StatusOr<SourceListing> ListHubSuite(transfer::HttpClient& client, absl::string_view pattern,
                                           const HubSuiteOptions& options);

}  // namespace anisoscope::listing
