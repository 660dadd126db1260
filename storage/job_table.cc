#include "storage/job_table.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/result_tables.h"

namespace anisoscope::storage {
namespace {

using nlohmann::json;

absl::Status JobNotFound(int64_t id) {
  return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
}

// Runs `update`, an UPDATE of job `id`'s row ending in RETURNING updated_at, and returns the
// new updated_at: the store is the one clock of a job's changes.
absl::StatusOr<std::string> UpdatedAtOf(Statement& update, int64_t id) {
  ASSIGN_OR_RETURN(const bool row, update.Step());
  if (!row) return JobNotFound(id);
  std::string updated_at = update.ColumnText(0);
  ASSIGN_OR_RETURN(const bool more, update.Step());
  if (more) return absl::InternalError(absl::StrCat("job ", id, " is stored twice"));
  return updated_at;
}

absl::StatusOr<std::string> BumpUpdatedAt(SqliteDb* db, int64_t id) {
  ASSIGN_OR_RETURN(Statement update,
                   db->Prepare(absl::StrCat("UPDATE jobs SET updated_at = ", kNowSql,
                                            " WHERE id = ? RETURNING updated_at")));
  RETURN_IF_ERROR(update.BindAll(id));
  return UpdatedAtOf(update, id);
}

// The job row at the statement's current position: id, spec_json, state, error,
// created_at, updated_at.
absl::StatusOr<JobRecord> JobFromRow(const Statement& row) {
  JobRecord job;
  job.id = row.ColumnInt64(0);
  auto spec = JobSpecFromJson(row.ColumnText(1));
  if (!spec.ok()) {
    return absl::DataLossError(absl::StrCat("job ", job.id, ": ", spec.status().message()));
  }
  job.spec = *std::move(spec);
  const std::string state = row.ColumnText(2);
  const std::optional<JobState> parsed = ParseJobState(state);
  if (!parsed) return absl::DataLossError(absl::StrCat("job ", job.id, ": bad state ", state));
  job.state = *parsed;
  job.error = row.ColumnText(3);
  job.created_at = row.ColumnText(4);
  job.updated_at = row.ColumnText(5);
  job.spec.ns = row.ColumnText(6);
  job.spec.source = std::string(row.ColumnBlob(7));
  return job;
}

absl::Status LoadCheckpoints(SqliteDb* db, JobRecord* job) {
  ASSIGN_OR_RETURN(
      Statement select,
      db->Prepare("SELECT step, path, size_bytes, state, error, probe_id, seconds, attempt, "
                  "lease_id, lease_local, worker, fingerprint, duplicate_of, lease_holder, "
                  "remote, remote_revision, remote_commit FROM checkpoints WHERE job_id = ? "
                  "ORDER BY step"));
  RETURN_IF_ERROR(select.BindAll(job->id));
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    JobCheckpoint& checkpoint = job->checkpoints.emplace_back();
    checkpoint.step = select.ColumnInt64(0);
    checkpoint.path = select.ColumnText(1);
    checkpoint.size_bytes = select.ColumnInt64(2);
    const std::string state = select.ColumnText(3);
    const std::optional<StepState> parsed = ParseStepState(state);
    if (!parsed) {
      return absl::DataLossError(
          absl::StrCat("job ", job->id, " step ", checkpoint.step, ": bad state ", state));
    }
    checkpoint.state = *parsed;
    checkpoint.error = select.ColumnText(4);
    checkpoint.probe_id = select.ColumnText(5);
    checkpoint.seconds = select.ColumnDouble(6);
    checkpoint.attempt = select.ColumnInt(7);
    checkpoint.lease_id = select.ColumnText(8);
    checkpoint.lease_local = select.ColumnInt(9) != 0;
    checkpoint.worker = select.ColumnText(10);
    checkpoint.fingerprint = select.ColumnText(11);
    checkpoint.duplicate_of = select.ColumnInt64(12);
    checkpoint.lease_holder = select.ColumnText(13);
    checkpoint.remote = std::string(select.ColumnBlob(14));
    checkpoint.revision = select.ColumnText(15);
    checkpoint.commit = select.ColumnText(16);
  }
  return absl::OkStatus();
}

// Inserts `checkpoints` of job `job_id` in their first state (pending unless a listing said
// otherwise), inside the caller's transaction.
absl::Status InsertCheckpoints(SqliteDb* db, int64_t job_id,
                               const std::vector<CheckpointSpec>& checkpoints) {
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare("INSERT INTO checkpoints (job_id, step, path, state, error, "
                               "duplicate_of, remote, remote_revision, remote_commit) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (const CheckpointSpec& checkpoint : checkpoints) {
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(job_id, checkpoint.step, checkpoint.path,
                                   StepStateName(checkpoint.state), checkpoint.error,
                                   checkpoint.duplicate_of));
    RETURN_IF_ERROR(insert.BindBlob(7, checkpoint.remote.data(), checkpoint.remote.size()));
    RETURN_IF_ERROR(insert.Bind(8, checkpoint.revision));
    RETURN_IF_ERROR(insert.Bind(9, checkpoint.commit));
    const absl::Status status = insert.Run();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("checkpoint at step ", checkpoint.step,
                                                      " (listed twice?): ", status.message()));
    }
  }
  return absl::OkStatus();
}

constexpr char kSelectJobs[] =
    "SELECT id, spec_json, state, error, created_at, updated_at, namespace, source FROM jobs ";

}  // namespace

std::string JobSpecToJson(const JobSpec& spec) {
  json checkpoints = json::array();
  for (const CheckpointSpec& checkpoint : spec.checkpoints) {
    checkpoints.push_back({{"step", checkpoint.step}, {"path", checkpoint.path}});
  }
  json out = {{"run", spec.run},
              {"probe_source", spec.probe_source},
              {"probe_path", spec.probe_path},
              {"probe_mode", spec.probe_mode},
              {"samples", spec.samples},
              {"seq_len", spec.seq_len},
              {"token_samples", spec.token_samples},
              {"force", spec.force},
              {"dedupe", spec.dedupe},
              {"checkpoints", std::move(checkpoints)}};
  if (spec.metrics != "all") out["metrics"] = spec.metrics;
  if (!spec.follow_dir.empty()) {
    out["follow_dir"] = spec.follow_dir;
    if (spec.until_step.has_value()) out["until_step"] = *spec.until_step;
  }
  return out.dump();
}

absl::StatusOr<JobSpec> JobSpecFromJson(const std::string& text) {
  try {
    const json in = json::parse(text);
    JobSpec spec;
    spec.run = in.value("run", "");
    spec.probe_source = in.value("probe_source", "");
    spec.probe_path = in.value("probe_path", "");
    spec.probe_mode = in.value("probe_mode", "");
    spec.samples = in.value("samples", spec.samples);
    spec.seq_len = in.value("seq_len", spec.seq_len);
    spec.token_samples = in.value("token_samples", spec.token_samples);
    spec.metrics = in.value("metrics", spec.metrics);
    spec.force = in.value("force", false);
    spec.dedupe = in.value("dedupe", false);
    spec.follow_dir = in.value("follow_dir", "");
    if (in.contains("until_step")) spec.until_step = in.at("until_step").get<int64_t>();
    for (const json& checkpoint : in.value("checkpoints", json::array())) {
      spec.checkpoints.push_back(
          {checkpoint.at("step").get<int64_t>(), checkpoint.at("path").get<std::string>()});
    }
    return spec;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed job spec JSON: ", e.what()));
  }
}

absl::StatusOr<int64_t> CreateJobInDb(SqliteDb* db, const JobSpec& spec,
                                      const std::string& unit_probe) {
  if (spec.run.empty()) return absl::InvalidArgumentError("job spec has an empty run name");
  if (spec.ns.empty()) return absl::InvalidArgumentError("job spec has an empty namespace");
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare(absl::StrCat("INSERT INTO jobs (namespace, run, spec_json, state, "
                                            "error, created_at, updated_at, source) "
                                            "VALUES (?, ?, ?, 'queued', '', ",
                                            kNowSql, ", ", kNowSql, ", ?)")));
  RETURN_IF_ERROR(insert.BindAll(spec.ns, spec.run, JobSpecToJson(spec)));
  RETURN_IF_ERROR(insert.BindBlob(4, spec.source.data(), spec.source.size()));
  RETURN_IF_ERROR(insert.Run());
  const int64_t id = db->LastInsertRowId();
  if (!unit_probe.empty()) {
    ASSIGN_OR_RETURN(Statement probe,
                     db->Prepare("INSERT INTO job_probes (job_id, unit_probe) VALUES (?, ?)"));
    RETURN_IF_ERROR(probe.Bind(1, id));
    RETURN_IF_ERROR(probe.BindBlob(2, unit_probe.data(), unit_probe.size()));
    RETURN_IF_ERROR(probe.Run());
  }

  RETURN_IF_ERROR(InsertCheckpoints(db, id, spec.checkpoints));
  RETURN_IF_ERROR(transaction.Commit());
  return id;
}

absl::StatusOr<std::optional<std::string>> JobProbeFromDb(SqliteDb* db, int64_t id) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT jobs.id, job_probes.unit_probe FROM jobs LEFT JOIN "
                               "job_probes ON job_probes.job_id = jobs.id WHERE jobs.id = ?"));
  RETURN_IF_ERROR(select.BindAll(id));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) return JobNotFound(id);
  if (select.ColumnIsNull(1)) return std::nullopt;
  return std::string(select.ColumnBlob(1));
}

absl::StatusOr<std::string> AddJobCheckpointsInDb(SqliteDb* db, int64_t job_id,
                                                  const std::vector<CheckpointSpec>& checkpoints) {
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ASSIGN_OR_RETURN(std::string updated_at, BumpUpdatedAt(db, job_id));
  RETURN_IF_ERROR(InsertCheckpoints(db, job_id, checkpoints));
  RETURN_IF_ERROR(transaction.Commit());
  return updated_at;
}

absl::StatusOr<JobRecord> GetJobFromDb(SqliteDb* db, int64_t id) {
  ASSIGN_OR_RETURN(Statement select, db->Prepare(absl::StrCat(kSelectJobs, "WHERE id = ?")));
  RETURN_IF_ERROR(select.BindAll(id));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) return JobNotFound(id);
  ASSIGN_OR_RETURN(JobRecord job, JobFromRow(select));
  RETURN_IF_ERROR(LoadCheckpoints(db, &job));
  return job;
}

absl::StatusOr<std::vector<JobRecord>> ListJobsInDb(SqliteDb* db, int limit, const std::string& ns,
                                                    const std::string& run) {
  ASSIGN_OR_RETURN(
      Statement select,
      db->Prepare(absl::StrCat(kSelectJobs, "WHERE namespace = ?1 AND (?2 = '' OR run = ?2) ",
                               "ORDER BY id DESC LIMIT ?3")));
  RETURN_IF_ERROR(select.BindAll(ns, run, limit > 0 ? static_cast<int64_t>(limit) : int64_t{-1}));
  std::vector<JobRecord> jobs;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(JobRecord job, JobFromRow(select));
    jobs.push_back(std::move(job));
  }
  for (JobRecord& job : jobs) RETURN_IF_ERROR(LoadCheckpoints(db, &job));
  return jobs;
}

absl::StatusOr<std::vector<int64_t>> UnfinishedJobsInDb(SqliteDb* db) {
  ASSIGN_OR_RETURN(
      Statement select,
      db->Prepare("SELECT id FROM jobs WHERE state IN ('queued', 'running') ORDER BY id"));
  std::vector<int64_t> ids;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    ids.push_back(select.ColumnInt64(0));
  }
  return ids;
}

absl::StatusOr<StoreStats> StoreStatsFromDb(SqliteDb* db) {
  StoreStats stats;
  for (const JobState state : kJobStates) stats.jobs_by_state[JobStateName(state)] = 0;
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    stats.jobs_by_state[select.ColumnText(0)] = select.ColumnInt64(1);
  }
  ASSIGN_OR_RETURN(Statement size, db->Prepare("SELECT page_count * page_size FROM "
                                               "pragma_page_count(), pragma_page_size()"));
  ASSIGN_OR_RETURN(const bool row, size.Step());
  if (row) stats.database_bytes = size.ColumnInt64(0);
  return stats;
}

absl::StatusOr<std::string> SetJobStateInDb(SqliteDb* db, int64_t id, JobState state,
                                            const std::string& error) {
  ASSIGN_OR_RETURN(Statement update,
                   db->Prepare(absl::StrCat("UPDATE jobs SET state = ?, error = ?, updated_at = ",
                                            kNowSql, " WHERE id = ? RETURNING updated_at")));
  RETURN_IF_ERROR(update.BindAll(JobStateName(state), error, id));
  return UpdatedAtOf(update, id);
}

absl::StatusOr<std::string> UpdateCheckpointInTransaction(SqliteDb* db, int64_t job_id,
                                                          const JobCheckpoint& checkpoint) {
  ASSIGN_OR_RETURN(Statement update,
                   db->Prepare("UPDATE checkpoints SET state = ?, error = ?, probe_id = ?, "
                               "seconds = ?, size_bytes = ?, attempt = ?, lease_id = ?, "
                               "lease_local = ?, worker = ?, fingerprint = ?, duplicate_of = ?, "
                               "lease_holder = ? WHERE job_id = ? AND step = ?"));
  RETURN_IF_ERROR(update.BindAll(
      StepStateName(checkpoint.state), checkpoint.error, checkpoint.probe_id, checkpoint.seconds,
      checkpoint.size_bytes, checkpoint.attempt, checkpoint.lease_id,
      int64_t{checkpoint.lease_local ? 1 : 0}, checkpoint.worker, checkpoint.fingerprint,
      checkpoint.duplicate_of, checkpoint.lease_holder, job_id, checkpoint.step));
  RETURN_IF_ERROR(update.Run());
  if (db->Changes() == 0) {
    RETURN_IF_ERROR(GetJobFromDb(db, job_id).status());
    return absl::NotFoundError(
        absl::StrCat("job ", job_id, " has no checkpoint at step ", checkpoint.step));
  }
  return BumpUpdatedAt(db, job_id);
}

absl::StatusOr<std::string> UpdateCheckpointInDb(SqliteDb* db, int64_t job_id,
                                                 const JobCheckpoint& checkpoint) {
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ASSIGN_OR_RETURN(std::string updated_at, UpdateCheckpointInTransaction(db, job_id, checkpoint));
  RETURN_IF_ERROR(transaction.Commit());
  return updated_at;
}

absl::StatusOr<FinishedLease> FinishLeaseInDb(SqliteDb* db, int64_t job_id,
                                              const std::string& lease_id, JobCheckpoint checkpoint,
                                              const StepResult& result, StoreMode mode) {
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT lease_id FROM checkpoints WHERE job_id = ? AND step = ?"));
  RETURN_IF_ERROR(select.BindAll(job_id, checkpoint.step));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found || lease_id.empty() || select.ColumnText(0) != lease_id) {
    return absl::FailedPreconditionError(absl::StrCat("lease ", lease_id, " of job ", job_id,
                                                      " step ", checkpoint.step,
                                                      " is no longer current"));
  }
  checkpoint.fingerprint = result.fingerprint;
  ASSIGN_OR_RETURN(
      checkpoint.duplicate_of,
      EarlierStepWithFingerprintInDb(db, result.ns, result.run, result.fingerprint, result.step));
  if (mode.dedupe && checkpoint.duplicate_of >= 0) {
    checkpoint.state = StepState::kSkipped;
    checkpoint.error = DedupeSkipReason(checkpoint.duplicate_of, result.fingerprint);
  } else {
    const absl::Status written = WriteStepInTransaction(db, result, mode.replace);
    if (absl::IsAlreadyExists(written)) {
      checkpoint.state = StepState::kSkipped;  // stored meanwhile by another job
    } else {
      RETURN_IF_ERROR(written);
    }
  }
  FinishedLease finished{checkpoint};
  ASSIGN_OR_RETURN(finished.updated_at, UpdateCheckpointInTransaction(db, job_id, checkpoint));
  RETURN_IF_ERROR(transaction.Commit());
  return finished;
}

}  // namespace anisoscope::storage
