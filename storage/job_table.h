// Jobs in SQL: the `jobs` table (spec as JSON, state, error), the `job_probes` table (the
// probe its units carry) and the `checkpoints` table (one row per checkpoint of a job).
//
// Free functions over one SqliteDb; not thread-safe (the caller serializes). Every call
// blocks on SQLite I/O. Timestamps are ISO 8601 UTC with a 'Z'.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite_db.h"
#include "storage/types.h"

namespace anisoscope::storage {

// The spec as stored in jobs.spec_json, and back (INVALID_ARGUMENT on malformed JSON).
std::string JobSpecToJson(const JobSpec& spec);
absl::StatusOr<JobSpec> JobSpecFromJson(const std::string& json);

// Inserts a queued job, its unit probe (serialized; "" stores none, as before schema 8) and its
// checkpoints (pending, size 0) in one transaction. INVALID_ARGUMENT for an empty run or a step
// listed twice.
absl::StatusOr<int64_t> CreateJobInDb(SqliteDb* db, const JobSpec& spec,
                                      const std::string& unit_probe);
// The unit probe stored with job `id`; nullopt for a job stored before schema 8. NOT_FOUND
// for an unknown job.
absl::StatusOr<std::optional<std::string>> JobProbeFromDb(SqliteDb* db, int64_t id);
// NOT_FOUND "job 42 not found".
absl::StatusOr<JobRecord> GetJobFromDb(SqliteDb* db, int64_t id);
// Namespace `ns`'s jobs (only `run`'s unless it is empty), most recent first; `limit` <= 0
// means all.
absl::StatusOr<std::vector<JobRecord>> ListJobsInDb(SqliteDb* db, int limit, const std::string& ns,
                                                    const std::string& run);
// Queued or running jobs, oldest first.
absl::StatusOr<std::vector<int64_t>> UnfinishedJobsInDb(SqliteDb* db);
// Jobs by state (every state, zeros included) and the database's size in bytes.
absl::StatusOr<StoreStats> StoreStatsFromDb(SqliteDb* db);
// Every change below bumps the job's updated_at and returns its new value: the store is the
// one clock of a job's changes, and the server's copy of a running job takes its time from it.
//
// Appends pending `checkpoints` to job `job_id` (a followed run's new steps) in one
// transaction; NOT_FOUND for an unknown job, the store's error for a step it already has.
absl::StatusOr<std::string> AddJobCheckpointsInDb(SqliteDb* db, int64_t job_id,
                                                  const std::vector<CheckpointSpec>& checkpoints);
// NOT_FOUND for an unknown job or step.
absl::StatusOr<std::string> SetJobStateInDb(SqliteDb* db, int64_t id, JobState state,
                                            const std::string& error);
absl::StatusOr<std::string> UpdateCheckpointInDb(SqliteDb* db, int64_t job_id,
                                                 const JobCheckpoint& checkpoint);
// Ends lease `lease_id` of `checkpoint.step` in one transaction: writes `result` (a step
// already stored makes the checkpoint skipped unless `mode.replace`; with `mode.dedupe`, so
// does an earlier stored step of the run with the same fingerprint) and stores `checkpoint`
// with the fingerprint and the earlier step it duplicates. FAILED_PRECONDITION, changing
// nothing, when the lease is not the current one.
absl::StatusOr<FinishedLease> FinishLeaseInDb(SqliteDb* db, int64_t job_id,
                                              const std::string& lease_id, JobCheckpoint checkpoint,
                                              const StepResult& result, StoreMode mode);

}  // namespace anisoscope::storage
