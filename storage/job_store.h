// JobStore: the part of the store the job runner (server/jobs/) needs: jobs with their
// checkpoints and probe, a lease's end with its step, the two look-ups of a lease's
// verdicts, and the audit log. MetricsStore is one; tests may give the runner a fake.
//
// Implementations are thread-safe; every call blocks on the store's I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/types.h"

namespace anisoscope::storage {

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Stores a new job (state queued, every checkpoint pending) with the probe its units carry
  // (`unit_probe`: an anisoscope.v1.UnitProbe, serialized; "" stores none), and returns its id.
  virtual absl::StatusOr<int64_t> CreateJob(const JobSpec& spec, const std::string& unit_probe) = 0;
  // NOT_FOUND for an unknown id.
  virtual absl::StatusOr<JobRecord> GetJob(int64_t id) = 0;
  // The probe stored with job `id` at submit; nullopt for a job stored before probes were
  // (schema 7 and earlier). NOT_FOUND for an unknown id.
  virtual absl::StatusOr<std::optional<std::string>> JobProbe(int64_t id) = 0;
  // Namespace `ns`'s jobs, most recent first, at most `limit` (<= 0: all); only `run`'s
  // jobs unless it is empty.
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit, const std::string& ns,
                                                          const std::string& run) = 0;
  // Ids of jobs left queued or running (to resume after a restart), oldest first.
  virtual absl::StatusOr<std::vector<int64_t>> UnfinishedJobs() = 0;
  // Appends pending checkpoints to a job (see AddJobCheckpointsInDb). This and the other
  // changes of a job return its new updated_at.
  virtual absl::StatusOr<std::string> AddJobCheckpoints(
      int64_t job_id, const std::vector<CheckpointSpec>& checkpoints) = 0;
  virtual absl::StatusOr<std::string> SetJobState(int64_t id, JobState state,
                                                  const std::string& error) = 0;
  virtual absl::StatusOr<std::string> UpdateCheckpoint(int64_t job_id,
                                                       const JobCheckpoint& checkpoint) = 0;
  // Ends a lease in one transaction: the step's results and the checkpoint's new state, or
  // FAILED_PRECONDITION and nothing when `lease_id` is not the checkpoint's current lease.
  // The stored state is SKIPPED when the step was stored meanwhile and not `mode.replace`,
  // or when an earlier step of the run has its fingerprint and `mode.dedupe`.
  virtual absl::StatusOr<FinishedLease> FinishLease(int64_t job_id, const std::string& lease_id,
                                                    const JobCheckpoint& checkpoint,
                                                    const StepResult& result, StoreMode mode) = 0;

  // True when (ns, run, probe_id, step) is stored.
  virtual absl::StatusOr<bool> HasStep(const std::string& ns, const std::string& run,
                                       const std::string& probe_id, int64_t step) = 0;
  // The earliest stored step of (ns, run) before `step` whose weight files have
  // `fingerprint`; -1 when none (or `fingerprint` is empty).
  virtual absl::StatusOr<int64_t> EarlierStepWithFingerprint(const std::string& ns,
                                                             const std::string& run,
                                                             const std::string& fingerprint,
                                                             int64_t step) = 0;
  virtual absl::Status AppendAudit(const AuditEntry& entry) = 0;

 protected:
  JobStore() = default;
};

}  // namespace anisoscope::storage
