// The GETs of a listing: bounded pages, counted, errors prefixed with what was being listed.
// Thread-safe (the HttpClient is; the counters are atomic). Every call blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sources/listing/remote_listing.h"
#include "sources/transfer/http_client.h"

namespace anisoscope::listing {

// What one listing may cost: a listing past a bound is refused (RESOURCE_EXHAUSTED naming
// the repo or bucket and the bound), never followed without end.
struct ListingBounds {
  // Pages of one paginated listing (a step's tree, the refs, an S3 folder, a model search).
  int max_pages = 1000;
  // File entries of one step's listing.
  int64_t max_entries = 100000;
  // Bytes of one page's body.
  int64_t max_page_bytes = 16 << 20;
  // Steps listed at once (the per-step GETs run on this many threads).
  int parallel_requests = 8;
  // Steps of one whole listing (branches, repos or folders that carry a step, as selected):
  // a Pythia size has 154 branches, OLMo's a few thousand; ten thousand leaves room for the
  // largest public series while a refs page of junk cannot make a listing of millions of trees.
  int64_t max_steps = kDefaultMaxSteps;
  // Files of one whole listing, over every step: tens per step at most in public series, so
  // a million bounds the server's memory for a listing (~ hundreds of MiB at worst) while
  // leaving ample room (10,000 steps x 100 files).
  int64_t max_total_files = kDefaultMaxTotalFiles;

  static constexpr int64_t kDefaultMaxSteps = 10000;
  static constexpr int64_t kDefaultMaxTotalFiles = 1000000;
};

// OK when `steps` steps fit bounds.max_steps; else RESOURCE_EXHAUSTED naming `where` (the
// source) and the bound.
absl::Status CheckStepCount(int64_t steps, const ListingBounds& bounds, absl::string_view where);
// OK when the files of `listing`'s steps fit bounds.max_total_files; else RESOURCE_EXHAUSTED
// naming `where` and the bound.
absl::Status CheckTotalFiles(const SourceListing& listing, const ListingBounds& bounds,
                             absl::string_view where);

class ListingFetcher {
 public:
  // `client` must outlive this.
  ListingFetcher(transfer::HttpClient& client, ListingBounds bounds);

  // GET `url` (a page of a listing), counted as a request and a page. Its error keeps its
  // code and payloads (http_error.h) and is prefixed with `where`.
  absl::StatusOr<transfer::HttpResponse> GetPage(const std::string& url, absl::string_view accept,
                                                 absl::string_view where);

  const ListingBounds& bounds() const { return bounds_; }
  // Requests and pages so far; transfer: the client's counters since this was made (a
  // client shared with other callers counts theirs too).
  ListingCounters counters() const;

 private:
  transfer::HttpClient& client_;
  const ListingBounds bounds_;
  const transfer::TransferCounters start_;
  std::atomic<int64_t> requests_{0};
};

// `status` with "`where`: " before its message, its code and payloads kept.
absl::Status Annotate(const absl::Status& status, absl::string_view where);

// Whether an error of one step's listing is that step's problem (a missing revision, a
// malformed or hostile or oversized listing) rather than the whole listing's (credentials,
// a server that does not answer).
bool IsStepProblem(const absl::Status& status);

}  // namespace anisoscope::listing
