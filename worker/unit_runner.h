// UnitRunner: runs one leased unit through the engine, from the lease to the upload.
//
// The steps of a unit, one function each: make its file gate (the unit's namespace roots
// within the worker's own --allow-root: every file of the unit is opened through it, at
// open time), build the probe (token ids as sent; text tokenized with the checkpoint's
// tokenizer), tell the server the probe's id (it may skip a stored step), extract with the
// lease kept alive, upload. The upload runs on a thread of its own (its lease still kept
// alive) while the next unit is leased and extracted; at most one upload is in flight. A
// failure becomes a FailWork in one place (ReportFailure): a stop gives the lease back, an
// out-of-memory is retryable, anything else fails the step with the error naming the file
// and field. While a unit is extracted, the job's next checkpoint (the server's hint) is
// read into the page cache.
//
// A remote unit (WorkUnit.remote, issue 38) is first fetched into the node's cache from this
// worker's own endpoints (RemoteSteps: heartbeats carry its download's progress, a cancelled
// lease stops it, the unit's next_remote downloads while it computes); the engine then reads
// the pinned snapshot folder through a gate over the cache folder. The pin is held until
// CompleteWork or FailWork has returned, then dropped, so that the cache may evict the step.
// A fetch that fails fails only its unit, with the fetcher's message (repo, revision, file):
// RETRYABLE for UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED (a full cache), FAILED
// otherwise. Not thread-safe: one runner per worker thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "analysis/checkpoint/checkpoint_prefetcher.h"
#include "analysis/extractor/extractor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "common/file_gate.h"
#include "sources/fetch/fetch_step.h"
#include "worker/lease_keeper.h"
#include "worker/remote_source.h"
#include "worker/remote_steps.h"
#include "worker/step_bounds.h"
#include "worker/step_watchdog.h"
#include "worker/work_client.h"

namespace anisoscope::worker {

// Makes an extractor computing in `dtype` (the unit's extraction option).
using ExtractorFactory =
    std::function<absl::StatusOr<std::unique_ptr<analysis::Extractor>>(const std::string& dtype)>;

class UnitRunner {
 public:
  // What bounds a step, and what ends the process when a step cannot be stopped.
  struct Guard {
    StepBounds bounds;
    // Ends the process (a step past its deadline is abandoned: nothing inside the process
    // can stop it). Null: no watchdog (threads sharing a process, e.g. tests).
    std::function<void()> abandon_process;
  };

  // None is owned; all outlive the runner. `own_files` is the worker's own gate (its
  // --allow-root; the server's roots for an embedded worker). `remote` fetches remote units;
  // null: they fail (FAILED_PRECONDITION).
  UnitRunner(const ExtractorFactory* factory, const FileGate* own_files, WorkClient* client,
             std::string worker_name, Guard guard = {}, RemoteSource* remote = nullptr);

  ~UnitRunner() { Flush(); }

  // Runs `unit` to its end: its upload started, reported failed or given back, or dropped
  // because the server ended the lease. Blocks for the extraction (and for the previous
  // unit's upload, if still in flight, before starting this one's).
  void Run(const ::anisoscope::v1::WorkUnit& unit);
  // Waits for the upload in flight, if any.
  void Flush();
  // The server had no unit for this worker: drops remote steps fetched ahead for it.
  void Idle();

 private:
  // A unit's run so far: the remote step it holds (pinned), and whether its error is the
  // fetch's.
  struct Held {
    std::optional<fetch::FetchedStep> fetched;
    bool fetch_failed = false;
  };

  // The upload, or nullopt when the server ended the lease.
  absl::StatusOr<std::optional<::anisoscope::v1::CompleteWorkRequest>> RunSteps(
      const ::anisoscope::v1::WorkUnit& unit, LeaseKeeper* keeper, Held* held);
  // The unit's remote step, fetched into the cache and pinned; its progress in `keeper`'s
  // heartbeats.
  absl::StatusOr<fetch::FetchedStep> FetchRemote(const ::anisoscope::v1::WorkUnit& unit,
                                                 LeaseKeeper* keeper);
  // The unit's roots within the worker's own; PERMISSION_DENIED when none is left.
  absl::StatusOr<FileGate> GateOf(const ::anisoscope::v1::WorkUnit& unit) const;
  // A remote unit's gate: the cache folder, and for a text probe the unit's roots within the
  // worker's own.
  absl::StatusOr<FileGate> RemoteGateOf(const ::anisoscope::v1::WorkUnit& unit) const;
  absl::StatusOr<analysis::ProbeSpec> ProbeSpecOf(const ::anisoscope::v1::UnitProbe& probe) const;
  absl::StatusOr<analysis::Extractor*> ExtractorFor(const std::string& dtype);
  // Sends `request` on the upload thread; `keeper` heartbeats until it is stored.
  // `fetched` (the remote step's pin) is dropped once the upload has returned.
  void StartUpload(const ::anisoscope::v1::WorkUnit& unit, std::unique_ptr<LeaseKeeper> keeper,
                   ::anisoscope::v1::CompleteWorkRequest request,
                   std::optional<fetch::FetchedStep> fetched);
  // `from_fetch`: the error is the remote step's fetch (see the file comment for its kinds).
  void ReportFailure(const ::anisoscope::v1::WorkUnit& unit, const absl::Status& status,
                     bool from_fetch = false);
  // The watchdog's call for a step past its deadline: reports it failed, then abandons the
  // process.
  void Abandon(const std::string& why);
  // Starts reading the unit's next_checkpoint_path ahead through `files`.
  void PrefetchNext(const ::anisoscope::v1::WorkUnit& unit, const FileGate& files);

  const ExtractorFactory* const factory_;
  const FileGate* const own_files_;
  WorkClient* const client_;
  const std::string name_;
  std::string dtype_;  // of extractor_
  std::unique_ptr<analysis::Extractor> extractor_;
  std::thread upload_;                         // the upload in flight
  analysis::CheckpointPrefetcher prefetcher_;  // reads the next unit's checkpoint ahead
  const Guard guard_;
  absl::Mutex unit_mu_;
  ::anisoscope::v1::WorkUnit unit_ ABSL_GUARDED_BY(unit_mu_);  // the one being run
  std::unique_ptr<StepWatchdog> watchdog_;     // null without guard_.abandon_process
  RemoteSource* const remote_;                 // null: remote units fail
  std::unique_ptr<RemoteSteps> remote_steps_;  // with remote_
};

}  // namespace anisoscope::worker
