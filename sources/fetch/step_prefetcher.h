// StepPrefetcher: the worker's pipeline. While step n computes, step n+1 downloads, so a
// series costs about max(sum of downloads, sum of computes) plus one step, not their sum.
//
//   StepPrefetcher prefetcher(&fetcher, {.depth = 1}, on_progress);
//   prefetcher.Start(steps[0]);
//   for (n...) {
//     if (n + 1 < steps.size()) prefetcher.Start(steps[n + 1]);
//     ASSIGN_OR_RETURN(FetchedStep step, prefetcher.Take(steps[n]));  // waits for it
//     compute and store; then drop `step` (its pin)
//   }
//
// One background thread fetches the started steps in order, holding at most `depth` of them
// (downloading or downloaded, not yet taken): with depth 1 the disk holds the step being
// computed and the next one. A failed fetch fails only its own Take. Steps are matched by
// repo and snapshot.
//
// Bounds: `depth` steps held, `max_queued` steps waiting to start, one thread.
// Cancel() (and the destructor) stops the queue, drops the steps not taken (their pins
// released) and waits for the download in flight, which is abandoned mid-file (within about
// 100 ms: DownloadRequest::cancel), its `.incomplete` file and reservation dropped.
//
// Thread-safe. Start never blocks on the network; Take blocks until its step is fetched.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sources/fetch/fetch_step.h"
#include "sources/fetch/step_fetcher.h"

namespace anisoscope::fetch {

struct StepPrefetcherOptions {
  // Steps fetched ahead of the one the caller computes (downloading or waiting to be taken).
  int depth = 1;
  // Started steps waiting for their turn; Start() past this is RESOURCE_EXHAUSTED.
  int max_queued = 64;
};

class StepPrefetcher {
 public:
  // `fetcher` is borrowed and must outlive this. `on_progress` (may be empty) runs on the
  // background thread for prefetched steps, on the caller's for a step Take() fetches itself.
  StepPrefetcher(const StepFetcher* fetcher, StepPrefetcherOptions options = {},
                 FetchProgressCallback on_progress = {});
  ~StepPrefetcher();  // Cancel()
  StepPrefetcher(const StepPrefetcher&) = delete;
  StepPrefetcher& operator=(const StepPrefetcher&) = delete;

  // Queues `step` for the background thread. OK and nothing new when it is already started;
  // INVALID_ARGUMENT for depth < 1; RESOURCE_EXHAUSTED past max_queued; CANCELLED after
  // Cancel().
  absl::Status Start(const FetchStep& step);

  // The step, pinned: the prefetched one (waiting for its download to end), or, when it was
  // not started or is still queued, fetched now on this thread. CANCELLED after Cancel().
  absl::StatusOr<FetchedStep> Take(const FetchStep& step);

  // Stops for good: drops the queue and the steps not taken, and returns once the download
  // in flight has stopped (mid-file, within about 100 ms). Idempotent.
  void Cancel();

  // Steps downloading or downloaded and not taken (for tests and metrics).
  int held() const;

 private:
  struct Entry {
    FetchStep step;
    bool running = false;
    std::optional<absl::StatusOr<FetchedStep>> result;  // set once fetched
  };
  static std::string Key(const FetchStep& step);
  void Run();

  const StepFetcher* const fetcher_;
  const StepPrefetcherOptions options_;
  const FetchProgressCallback on_progress_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;         // keys waiting to start, in order
  std::map<std::string, Entry> entries_;  // queued, running or fetched, not taken
  int held_ = 0;                          // running or fetched, not taken
  std::thread thread_;                    // started by the first Start()
  std::once_flag joined_;                 // Cancel() joins thread_ once
};

}  // namespace anisoscope::fetch
