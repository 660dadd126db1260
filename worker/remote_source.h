// RemoteSource: what one worker process fetches remote steps with (issue 38): its own
// endpoints and credentials (the operator's flags, never the server's word), one HttpClient
// per source, and the node's cache (--cache-dir, --cache-max-bytes), made at the first
// remote step so that a worker that never sees one needs no cache folder.
//
// Owned by the process (worker/main.cc) and shared by its runners; thread-safe. Create makes
// the clients only (no disk, no network); Fetcher blocks on the disk the first time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "sources/cache/source_cache.h"
#include "sources/endpoints/source_endpoints.h"
#include "sources/fetch/fetch_step.h"
#include "sources/fetch/step_fetcher.h"
#include "sources/transfer/transfer_options.h"

namespace anisoscope::worker {

class RemoteSource {
 public:
  struct Options {
    sources::SourceEndpoints endpoints;  // sources::ResolveSourceEndpoints of the flags
    std::string cache_dir;               // --cache-dir, resolved (worker/source_flags.h)
    uint64_t cache_max_bytes = 0;        // --cache-max-bytes
    transfer::TransferOptions transfer;  // retries, timeouts (defaults; tests shorten them)
  };

  // INVALID_ARGUMENT for an empty cache dir, a zero bound or transfer options out of range.
  static absl::StatusOr<std::unique_ptr<RemoteSource>> Create(Options options);
  // A source whose every remote step fails with `why` (UNAVAILABLE, so that another worker
  // may take it): the environment's credentials could not be read, and a worker that reads
  // folders should still start.
  static std::unique_ptr<RemoteSource> Unavailable(const absl::Status& why);

  // `remote` (a unit's) as the fetch of its step: URLs from this worker's endpoints, every
  // name checked (sources/endpoints/remote_checkpoint.h). INVALID_ARGUMENT naming the field.
  absl::StatusOr<fetch::FetchStep> Plan(const ::anisoscope::v1::RemoteCheckpoint& remote,
                                        int64_t step) const;

  // The fetcher of `kind`'s steps, on the node's cache (made now if not yet: UNAVAILABLE
  // naming --cache-dir when it cannot be). INVALID_ARGUMENT for an unknown kind.
  absl::StatusOr<const fetch::StepFetcher*> Fetcher(::anisoscope::v1::SourceKind kind);

  // The cache, once a Fetcher call made it; else null.
  cache::SourceCache* cache() const;
  const std::string& cache_dir() const { return options_.cache_dir; }
  uint64_t cache_max_bytes() const { return options_.cache_max_bytes; }

 private:
  RemoteSource(Options options, sources::SourceClients clients, absl::Status unavailable)
      : options_(std::move(options)),
        clients_(std::move(clients)),
        unavailable_(std::move(unavailable)) {}

  const Options options_;
  const sources::SourceClients clients_;
  const absl::Status unavailable_;  // OK, or why no remote step can be fetched
  mutable std::mutex mutex_;
  std::unique_ptr<cache::SourceCache> cache_;  // guarded by mutex_ until made, then fixed
  std::unique_ptr<fetch::StepFetcher> hub_;
  std::unique_ptr<fetch::StepFetcher> s3_;
};

}  // namespace anisoscope::worker
