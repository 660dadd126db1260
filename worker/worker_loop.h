// WorkerLoop: leases units from the server and runs them, one at a time, until told to
// stop, after `max_units` units, or after `idle_exit` without work. Rides out a server
// that is down or restarting with capped exponential backoff. The same loop serves the
// anisoscope-worker process and the server's embedded workers.
//
// Run blocks on the calling thread; Stop may be called from any thread (e.g. a signal
// thread): the unit in progress is interrupted and given back.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "common/file_gate.h"
#include "worker/remote_source.h"
#include "worker/unit_runner.h"
#include "worker/work_client.h"

namespace anisoscope::worker {

class WorkerLoop {
 public:
  struct Options {
    // Who this worker is, as the server shows it.
    ::anisoscope::v1::WorkerInfo info;
    // Exit after this many units; 0: no limit.
    int max_units = 0;
    // Exit after this long without a unit; zero: never.
    absl::Duration idle_exit = absl::ZeroDuration();
    // One long poll's wait for work.
    absl::Duration lease_wait = absl::Seconds(20);
    // Metadata sent with every call (e.g. the embedded workers' key).
    WorkClient::Metadata metadata;
    // The step's bounds and the process's end for a step that cannot be stopped.
    UnitRunner::Guard guard;
    // Fetches remote units (the process's one; not owned, outlives the loop); null: a remote
    // unit fails.
    RemoteSource* remote_source = nullptr;
  };

  // None is owned; all outlive the loop.
  WorkerLoop(const Options& options, ::anisoscope::v1::WorkerService::StubInterface* stub,
             const ExtractorFactory* factory, const FileGate* own_files);

  // Leases and runs units until Stop, max_units, idle_exit or the server's refusal of this
  // worker's credentials; returns the units run.
  int Run();
  void Stop() { client_.Stop(); }
  // Why the server refused this worker (UNAUTHENTICATED, PERMISSION_DENIED); OK otherwise.
  const absl::Status& refusal() const { return refusal_; }

 private:
  const Options options_;
  absl::Status refusal_;
  WorkClient client_;
  UnitRunner runner_;
};

}  // namespace anisoscope::worker
