#include "storage/sqlite_metrics_store.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/job_table.h"
#include "storage/result_tables.h"
#include "storage/schema.h"

namespace anisoscope::storage {

MetricsStore::~MetricsStore() = default;

absl::StatusOr<std::unique_ptr<MetricsStore>> MetricsStore::Open(const Options& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteMetricsStore> store, SqliteMetricsStore::Create(options));
  return std::unique_ptr<MetricsStore>(std::move(store));
}

absl::StatusOr<std::unique_ptr<SqliteMetricsStore>> SqliteMetricsStore::Create(
    const Options& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("database path is empty");
  const std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create the directory of database ",
                                                        options.path, ": ", error.message()));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db,
                   SqliteDb::Open({options.path, options.busy_timeout_ms}));
  RETURN_IF_ERROR(MigrateSchema(db.get()));
  return std::unique_ptr<SqliteMetricsStore>(new SqliteMetricsStore(std::move(db)));
}

absl::StatusOr<bool> SqliteMetricsStore::HasStep(const std::string& run,
                                                 const std::string& probe_id, int64_t step) {
  absl::MutexLock lock(&mu_);
  return HasStepInDb(db_.get(), run, probe_id, step);
}

absl::Status SqliteMetricsStore::WriteStep(const StepResult& result, bool replace) {
  absl::MutexLock lock(&mu_);
  return WriteStepToDb(db_.get(), result, replace);
}

absl::StatusOr<std::vector<RunInfo>> SqliteMetricsStore::ListRuns() {
  absl::MutexLock lock(&mu_);
  return ListRunsInDb(db_.get());
}

absl::StatusOr<SeriesResult> SqliteMetricsStore::QuerySeries(const SeriesQuery& query) {
  absl::MutexLock lock(&mu_);
  return QuerySeriesInDb(db_.get(), query);
}

absl::StatusOr<VectorResult> SqliteMetricsStore::QueryVectors(const VectorQuery& query) {
  absl::MutexLock lock(&mu_);
  return QueryVectorsInDb(db_.get(), query);
}

absl::StatusOr<int64_t> SqliteMetricsStore::CreateJob(const JobSpec& spec) {
  absl::MutexLock lock(&mu_);
  return CreateJobInDb(db_.get(), spec);
}

absl::StatusOr<JobRecord> SqliteMetricsStore::GetJob(int64_t id) {
  absl::MutexLock lock(&mu_);
  return GetJobFromDb(db_.get(), id);
}

absl::StatusOr<std::vector<JobRecord>> SqliteMetricsStore::ListJobs(int limit,
                                                                    const std::string& run) {
  absl::MutexLock lock(&mu_);
  return ListJobsInDb(db_.get(), limit, run);
}

absl::StatusOr<std::vector<int64_t>> SqliteMetricsStore::UnfinishedJobs() {
  absl::MutexLock lock(&mu_);
  return UnfinishedJobsInDb(db_.get());
}

absl::Status SqliteMetricsStore::SetJobState(int64_t id, JobState state, const std::string& error) {
  absl::MutexLock lock(&mu_);
  return SetJobStateInDb(db_.get(), id, state, error);
}

absl::Status SqliteMetricsStore::UpdateCheckpoint(int64_t job_id, const JobCheckpoint& checkpoint) {
  absl::MutexLock lock(&mu_);
  return UpdateCheckpointInDb(db_.get(), job_id, checkpoint);
}

absl::StatusOr<StepState> SqliteMetricsStore::FinishLease(int64_t job_id,
                                                          const std::string& lease_id,
                                                          const JobCheckpoint& checkpoint,
                                                          const StepResult& result, bool replace) {
  absl::MutexLock lock(&mu_);
  return FinishLeaseInDb(db_.get(), job_id, lease_id, checkpoint, result, replace);
}

}  // namespace anisoscope::storage
