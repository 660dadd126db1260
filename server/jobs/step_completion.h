// What ends a lease outside the job runner's lock, where the store is asked or written while
// other workers' calls go on: a heartbeat's verdicts (is the step stored already, are its
// weights an earlier step's) and a completion (the upload checked, stored with the lease's
// end in one transaction, the step's observers told). The runner takes what these need under
// its lock, calls them, and applies their answer under its lock again.
//
// Free functions; thread-safe; each blocks on the store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anisoscope/v1/anisoscope.pb.h"
#include "server/jobs/step_observer.h"
#include "storage/job_store.h"
#include "storage/types.h"

namespace anisoscope::server {

// What a heartbeat asks of the store about a leased step.
struct VerdictQuestion {
  std::string ns;
  std::string run;
  int64_t step = 0;
  std::string probe_id;     // non-empty: is (ns, run, probe_id, step) stored already?
  std::string fingerprint;  // non-empty: has an earlier stored step of the run these weights?
};

struct Verdict {
  enum class Kind { kContinue, kAlreadyStored, kDuplicate };
  Kind kind = Kind::kContinue;
  int64_t duplicate_of = -1;  // the earlier step, for kDuplicate
};

// The first question that has a yes, in that order; the store's error when it cannot answer.
absl::StatusOr<Verdict> AskStore(storage::JobStore& store, const VerdictQuestion& question);

// A completion as the runner saw its lease.
struct Completion {
  int64_t job_id = 0;
  std::string lease_id;
  std::string ns;
  std::string run;
  storage::StoreMode mode;
  std::string device;                                         // the worker's
  std::shared_ptr<const ::anisoscope::v1::UnitProbe> probe;  // the unit's
  storage::JobCheckpoint checkpoint;                          // as leased
};

// Checks `upload` against the shape it declares and the unit it answers (step_upload.h:
// INVALID_ARGUMENT naming the field), then stores the step and the lease's end in one
// transaction (the store's error, FAILED_PRECONDITION for a lease no longer current), the
// probe's description being the server's label (unit_probe.h ProbeLabel), and
// calls each of `observers` when the step was stored whole. Returns what was stored.
absl::StatusOr<storage::FinishedLease> StoreCompletion(
    const ::anisoscope::v1::CompleteWorkRequest& upload, const Completion& completion,
    storage::JobStore& store, const std::vector<StepObserver*>& observers, JobNotices& notices);

}  // namespace anisoscope::server
