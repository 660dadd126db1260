// StepFetcher: one step of a series, from its listing to a pinned folder in the node's cache.
// A step complete in the cache costs no request; otherwise each missing file is reserved in
// the cache (SourceCache::BeginFile), streamed into its `.incomplete` file by the HttpClient
// (the listing's size as the hard bound, its sha256 checked when given, a cut resumed by
// Range), and committed; the step's refs/ entry is written last.
//
// On any failure nothing is half-stored: the failed file's `.incomplete` is removed and its
// reservation released (files committed before it stay, as blobs other steps may share, and
// are evicted as usual), the step's pin is released, and the error names the step (repo,
// revision, commit) and the file, keeping the cause's code (DATA_LOSS for a size or hash
// that disagrees, RESOURCE_EXHAUSTED naming --cache-max-bytes, NOT_FOUND, ...). A cancelled
// fetch is CANCELLED; it stops mid-file, within about 100 ms (see Fetch).
//
// Thread-safe (the cache and the client are): several steps may be fetched at once.
// Fetch blocks on the network and the disk. The cache and the client are borrowed and must
// outlive the fetcher.
#pragma once

#include <atomic>

#include "absl/status/statusor.h"
#include "sources/cache/source_cache.h"
#include "sources/fetch/fetch_step.h"
#include "sources/transfer/http_client.h"

namespace anisoscope::fetch {

class StepFetcher {
 public:
  StepFetcher(cache::SourceCache* cache, transfer::HttpClient* client)
      : cache_(cache), client_(client) {}

  // Fetches `step` (see above) and returns it pinned. `on_progress` (may be empty) runs on
  // this thread. `cancel` (may be null) is read before each file and handed to the download
  // in flight (DownloadRequest::cancel): once it is true the fetch stops with CANCELLED
  // within about 100 ms, mid-file too, leaving nothing half-stored (as any failure).
  absl::StatusOr<FetchedStep> Fetch(const FetchStep& step,
                                    const FetchProgressCallback& on_progress = {},
                                    const std::atomic<bool>* cancel = nullptr) const;

  cache::SourceCache* cache() const { return cache_; }

 private:
  cache::SourceCache* const cache_;
  transfer::HttpClient* const client_;
};

// "hub:ORG/NAME revision R (commit C)", or "s3://BUCKET step S" without a revision: how
// errors and progress name a step.
std::string DescribeStep(const cache::CacheStep& step);

}  // namespace anisoscope::fetch
