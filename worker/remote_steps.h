// RemoteSteps: one runner's pipeline of remote steps (issue 38). A unit whose WorkUnit has
// `remote` set is fetched into the node's cache (RemoteSource) and handed back pinned; its
// `next_remote` then starts downloading (a StepPrefetcher of depth 1 per source) while the
// unit computes, so the next unit usually finds its step on disk. A step started ahead that
// the next unit does not ask for (another worker leased it) is dropped, its pin with it.
//
// While a step downloads, its progress goes to the caller's sink (the lease's heartbeats)
// and, every few seconds, into the worker's log (bytes/s, the cache's size). `cancelled` is
// polled every 100 ms: once true, the download in flight stops mid-file (CANCELLED).
//
// Owned by one UnitRunner: Fetch and DropPrefetched are called from its thread only; the
// progress callbacks come from the prefetch thread too and are serialized here. Fetch blocks
// on the network and the disk. `source` is borrowed and outlives this.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "sources/fetch/fetch_step.h"
#include "sources/fetch/step_prefetcher.h"
#include "worker/remote_source.h"

namespace anisoscope::worker {

class RemoteSteps {
 public:
  using ProgressSink = std::function<void(const fetch::FetchProgress&)>;

  RemoteSteps(RemoteSource* source, std::string worker_name)
      : source_(source), name_(std::move(worker_name)) {}
  ~RemoteSteps() { DropPrefetched(); }
  RemoteSteps(const RemoteSteps&) = delete;
  RemoteSteps& operator=(const RemoteSteps&) = delete;

  // The unit's remote step, pinned (see above); then starts unit.next_remote ahead. Errors
  // name the step (repo, revision, commit) and the file, keeping the fetch's code: the
  // RemoteCheckpoint's INVALID_ARGUMENT, DATA_LOSS, NOT_FOUND, UNAUTHENTICATED,
  // PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (cache full),
  // CANCELLED once `cancelled` said so. `on_progress` must not block.
  absl::StatusOr<fetch::FetchedStep> Fetch(const ::anisoscope::v1::WorkUnit& unit,
                                           const ProgressSink& on_progress,
                                           const std::function<bool()>& cancelled);

  // Drops the steps started ahead and not taken (their downloads stopped, pins released):
  // when the server has no work for this worker, the step it expected is someone else's.
  void DropPrefetched();

 private:
  // The prefetcher of `kind` over `fetcher`, made if needed.
  fetch::StepPrefetcher* PrefetcherFor(::anisoscope::v1::SourceKind kind,
                                       const fetch::StepFetcher* fetcher);
  // Starts unit.next_remote ahead; a failure is logged, never the unit's.
  void StartNext(const ::anisoscope::v1::WorkUnit& unit);
  // Any thread: the step being taken goes to sink_; every step to the log, now and then.
  void OnProgress(const fetch::FetchProgress& progress);

  RemoteSource* const source_;
  const std::string name_;
  // Indexed by SourceKind - 1 (Hub, S3).
  std::array<std::unique_ptr<fetch::StepPrefetcher>, 2> prefetchers_;
  std::string started_key_;  // the step started ahead and not yet taken; empty: none

  std::mutex progress_mu_;  // guards the three below
  std::string current_;     // DescribeStep of the step being taken
  ProgressSink sink_;
  absl::Time last_log_ = absl::InfinitePast();
};

}  // namespace anisoscope::worker
