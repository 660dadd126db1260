#include "storage/sqlite_metrics_store.h"

#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/access_tables.h"
#include "storage/alarm_table.h"
#include "storage/backup.h"
#include "storage/job_table.h"
#include "storage/result_tables.h"
#include "storage/schema.h"

namespace anisoscope::storage {

namespace {

// A file that was never SQLite is refused as such, not as a damaged database: a --db that
// names the wrong file is the likelier mistake. A missing or empty file is a new database.
absl::Status CheckSqliteHeader(const std::string& path) {
  constexpr std::string_view kHeader("SQLite format 3\0", 16);
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::OkStatus();  // missing (or unreadable: SQLite says why)
  std::string start(kHeader.size(), '\0');
  file.read(start.data(), static_cast<std::streamsize>(start.size()));
  const std::streamsize read = file.gcount();
  if (read == 0 || start == kHeader) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "database ", path, " is not a SQLite database (it does not start with SQLite's header): "
      "check --db, which names the server's database file (a new path starts an empty one)"));
}

}  // namespace

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
  RETURN_IF_ERROR(CheckSqliteHeader(options.path));
  // A file SQLite finds malformed while opening it or reading its schema (the schema's own
  // pages damaged) is refused with the same advice as one integrity_check finds damaged.
  auto damaged = [&](const absl::Status& status) {
    if (!absl::IsDataLoss(status)) return status;
    return absl::DataLossError(absl::StrCat("database ", options.path, " is damaged (",
                                            status.message(),
                                            "); restore it from a backup "
                                            "(anisoscope-server backup writes them)"));
  };
  absl::StatusOr<std::unique_ptr<SqliteDb>> opened =
      SqliteDb::Open({options.path, options.busy_timeout_ms});
  if (!opened.ok()) return damaged(opened.status());
  std::unique_ptr<SqliteDb> db = std::move(*opened);
  if (options.check_integrity) RETURN_IF_ERROR(CheckIntegrity(db.get()));
  if (absl::Status migrated = MigrateSchema(db.get()); !migrated.ok()) return damaged(migrated);
  if (options.max_pages > 0) {
    RETURN_IF_ERROR(db->Exec(absl::StrCat("PRAGMA max_page_count = ", options.max_pages)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> version_db,
                   SqliteDb::Open({options.path, options.busy_timeout_ms}));
  return std::unique_ptr<SqliteMetricsStore>(
      new SqliteMetricsStore(std::move(db), std::move(version_db)));
}

absl::StatusOr<bool> SqliteMetricsStore::HasStep(const std::string& ns, const std::string& run,
                                                 const std::string& probe_id, int64_t step) {
  absl::MutexLock lock(&mu_);
  return HasStepInDb(db_.get(), ns, run, probe_id, step);
}

absl::StatusOr<int64_t> SqliteMetricsStore::EarlierStepWithFingerprint(
    const std::string& ns, const std::string& run, const std::string& fingerprint, int64_t step) {
  absl::MutexLock lock(&mu_);
  return EarlierStepWithFingerprintInDb(db_.get(), ns, run, fingerprint, step);
}

absl::Status SqliteMetricsStore::WriteStep(const StepResult& result, bool replace) {
  absl::MutexLock lock(&mu_);
  return WriteStepToDb(db_.get(), result, replace);
}

absl::StatusOr<std::vector<RunInfo>> SqliteMetricsStore::ListRuns(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return ListRunsInDb(db_.get(), ns);
}

absl::StatusOr<RunInfo> SqliteMetricsStore::GetRun(const std::string& ns, const std::string& run) {
  absl::MutexLock lock(&mu_);
  return GetRunFromDb(db_.get(), ns, run);
}

absl::StatusOr<int64_t> SqliteMetricsStore::DataVersion() {
  absl::MutexLock lock(&version_mu_);
  if (!version_statement_.has_value()) {
    ASSIGN_OR_RETURN(version_statement_, version_db_->Prepare("PRAGMA data_version"));
  }
  absl::StatusOr<bool> row = version_statement_->Step();
  const int64_t version = row.ok() && *row ? version_statement_->ColumnInt64(0) : 0;
  version_statement_->Reset();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("PRAGMA data_version returned no row");
  return version;
}

absl::StatusOr<SeriesResult> SqliteMetricsStore::QuerySeries(const SeriesQuery& query) {
  absl::MutexLock lock(&mu_);
  return QuerySeriesInDb(db_.get(), query);
}

absl::StatusOr<SeriesCounts> SqliteMetricsStore::CountSeries(const SeriesQuery& query) {
  absl::MutexLock lock(&mu_);
  return CountSeriesInDb(db_.get(), query);
}

absl::StatusOr<VectorResult> SqliteMetricsStore::QueryVectors(const VectorQuery& query) {
  absl::MutexLock lock(&mu_);
  return QueryVectorsInDb(db_.get(), query);
}

absl::StatusOr<int64_t> SqliteMetricsStore::CreateJob(const JobSpec& spec,
                                                      const std::string& unit_probe) {
  absl::MutexLock lock(&mu_);
  return CreateJobInDb(db_.get(), spec, unit_probe);
}

absl::StatusOr<std::optional<std::string>> SqliteMetricsStore::JobProbe(int64_t id) {
  absl::MutexLock lock(&mu_);
  return JobProbeFromDb(db_.get(), id);
}

absl::StatusOr<JobRecord> SqliteMetricsStore::GetJob(int64_t id) {
  absl::MutexLock lock(&mu_);
  return GetJobFromDb(db_.get(), id);
}

absl::StatusOr<std::vector<JobRecord>> SqliteMetricsStore::ListJobs(int limit,
                                                                    const std::string& ns,
                                                                    const std::string& run) {
  absl::MutexLock lock(&mu_);
  return ListJobsInDb(db_.get(), limit, ns, run);
}

absl::StatusOr<std::vector<int64_t>> SqliteMetricsStore::UnfinishedJobs() {
  absl::MutexLock lock(&mu_);
  return UnfinishedJobsInDb(db_.get());
}

absl::StatusOr<std::string> SqliteMetricsStore::AddJobCheckpoints(
    int64_t job_id, const std::vector<CheckpointSpec>& checkpoints) {
  absl::MutexLock lock(&mu_);
  return AddJobCheckpointsInDb(db_.get(), job_id, checkpoints);
}

absl::StatusOr<StoreStats> SqliteMetricsStore::Stats() {
  absl::MutexLock lock(&mu_);
  return StoreStatsFromDb(db_.get());
}

absl::StatusOr<std::string> SqliteMetricsStore::SetJobState(int64_t id, JobState state,
                                                            const std::string& error) {
  absl::MutexLock lock(&mu_);
  return SetJobStateInDb(db_.get(), id, state, error);
}

absl::StatusOr<std::string> SqliteMetricsStore::UpdateCheckpoint(int64_t job_id,
                                                                 const JobCheckpoint& checkpoint) {
  absl::MutexLock lock(&mu_);
  return UpdateCheckpointInDb(db_.get(), job_id, checkpoint);
}

absl::StatusOr<FinishedLease> SqliteMetricsStore::FinishLease(int64_t job_id,
                                                              const std::string& lease_id,
                                                              const JobCheckpoint& checkpoint,
                                                              const StepResult& result,
                                                              StoreMode mode) {
  absl::MutexLock lock(&mu_);
  return FinishLeaseInDb(db_.get(), job_id, lease_id, checkpoint, result, mode);
}

absl::StatusOr<TokenRecord> SqliteMetricsStore::CreateToken(const TokenRecord& token) {
  absl::MutexLock lock(&mu_);
  return CreateTokenInDb(db_.get(), token);
}

absl::StatusOr<std::vector<TokenRecord>> SqliteMetricsStore::ListTokens(bool active_only) {
  absl::MutexLock lock(&mu_);
  return ListTokensInDb(db_.get(), active_only);
}

absl::StatusOr<TokenRecord> SqliteMetricsStore::RevokeToken(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return RevokeTokenInDb(db_.get(), name);
}

absl::Status SqliteMetricsStore::TouchToken(int64_t id) {
  absl::MutexLock lock(&mu_);
  return TouchTokenInDb(db_.get(), id);
}

absl::StatusOr<std::vector<std::string>> SqliteMetricsStore::NamespaceRoots(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return NamespaceRootsInDb(db_.get(), ns);
}

absl::Status SqliteMetricsStore::SetNamespaceRoots(const std::string& ns,
                                                   const std::vector<std::string>& roots) {
  absl::MutexLock lock(&mu_);
  return SetNamespaceRootsInDb(db_.get(), ns, roots);
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>>
SqliteMetricsStore::ListNamespaceRoots() {
  absl::MutexLock lock(&mu_);
  return ListNamespaceRootsInDb(db_.get());
}

absl::StatusOr<std::vector<std::string>> SqliteMetricsStore::NamespaceSources(
    const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return NamespaceSourcesInDb(db_.get(), ns);
}

absl::Status SqliteMetricsStore::SetNamespaceSources(const std::string& ns,
                                                     const std::vector<std::string>& sources) {
  absl::MutexLock lock(&mu_);
  return SetNamespaceSourcesInDb(db_.get(), ns, sources);
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>>
SqliteMetricsStore::ListNamespaceSources() {
  absl::MutexLock lock(&mu_);
  return ListNamespaceSourcesInDb(db_.get());
}

absl::Status SqliteMetricsStore::AppendAudit(const AuditEntry& entry) {
  absl::MutexLock lock(&mu_);
  return AppendAuditInDb(db_.get(), entry);
}

absl::StatusOr<std::vector<AuditEntry>> SqliteMetricsStore::ListAudit(int limit) {
  absl::MutexLock lock(&mu_);
  return ListAuditInDb(db_.get(), limit);
}

absl::StatusOr<std::vector<AlarmRecord>> SqliteMetricsStore::AlarmsOpenAt(
    const std::string& ns, const std::string& run, const std::string& probe_id, int64_t step) {
  absl::MutexLock lock(&mu_);
  return AlarmsOpenAtInDb(db_.get(), ns, run, probe_id, step);
}

absl::StatusOr<std::vector<AlarmRecord>> SqliteMetricsStore::RecordAlarms(
    const std::vector<AlarmRecord>& fired, const std::vector<AlarmRecord>& resolutions) {
  absl::MutexLock lock(&mu_);
  return RecordAlarmsInDb(db_.get(), fired, resolutions);
}

absl::StatusOr<AlarmList> SqliteMetricsStore::ListAlarms(const AlarmQuery& query) {
  absl::MutexLock lock(&mu_);
  return ListAlarmsInDb(db_.get(), query);
}

absl::StatusOr<std::vector<StepScalars>> SqliteMetricsStore::ScalarsBefore(
    const std::string& ns, const std::string& run, const std::string& probe_id,
    const std::string& metric, int64_t before_step, int steps) {
  absl::MutexLock lock(&mu_);
  return ScalarsBeforeInDb(db_.get(), ns, run, probe_id, metric, before_step, steps);
}

}  // namespace anisoscope::storage
