// SqliteMetricsStore: MetricsStore over one SQLite connection (see storage/metrics_store.h).
//
// Thread-safe: a mutex serializes every call on the connection. Several processes may open
// the same file; WAL lets readers run beside one writer and writers wait up to
// Options::busy_timeout_ms for each other.
#pragma once

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/metrics_store.h"
#include "storage/sqlite_db.h"

namespace anisoscope::storage {

class SqliteMetricsStore : public MetricsStore {
 public:
  // Creates the file (and its directory) when missing and migrates the schema.
  static absl::StatusOr<std::unique_ptr<SqliteMetricsStore>> Create(const Options& options);

  absl::StatusOr<bool> HasStep(const std::string& ns, const std::string& run,
                               const std::string& probe_id, int64_t step) override;
  absl::StatusOr<int64_t> EarlierStepWithFingerprint(const std::string& ns, const std::string& run,
                                                     const std::string& fingerprint,
                                                     int64_t step) override;
  absl::Status WriteStep(const StepResult& result, bool replace) override;

  absl::StatusOr<std::vector<RunInfo>> ListRuns(const std::string& ns) override;
  absl::StatusOr<RunInfo> GetRun(const std::string& ns, const std::string& run) override;
  absl::StatusOr<SeriesResult> QuerySeries(const SeriesQuery& query) override;
  absl::StatusOr<SeriesCounts> CountSeries(const SeriesQuery& query) override;
  absl::StatusOr<VectorResult> QueryVectors(const VectorQuery& query) override;
  absl::StatusOr<int64_t> DataVersion() override;

  absl::StatusOr<int64_t> CreateJob(const JobSpec& spec, const std::string& unit_probe) override;
  absl::StatusOr<JobRecord> GetJob(int64_t id) override;
  absl::StatusOr<std::optional<std::string>> JobProbe(int64_t id) override;
  // `limit` <= 0 lists every job.
  absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit, const std::string& ns,
                                                  const std::string& run) override;
  absl::StatusOr<std::vector<int64_t>> UnfinishedJobs() override;
  absl::StatusOr<StoreStats> Stats() override;
  absl::StatusOr<std::string> AddJobCheckpoints(
      int64_t job_id, const std::vector<CheckpointSpec>& checkpoints) override;
  absl::StatusOr<std::string> SetJobState(int64_t id, JobState state,
                                          const std::string& error) override;
  absl::StatusOr<std::string> UpdateCheckpoint(int64_t job_id,
                                               const JobCheckpoint& checkpoint) override;
  absl::StatusOr<FinishedLease> FinishLease(int64_t job_id, const std::string& lease_id,
                                            const JobCheckpoint& checkpoint,
                                            const StepResult& result, StoreMode mode) override;

  absl::StatusOr<TokenRecord> CreateToken(const TokenRecord& token) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(bool active_only) override;
  absl::StatusOr<TokenRecord> RevokeToken(const std::string& name) override;
  absl::Status TouchToken(int64_t id) override;
  absl::StatusOr<std::vector<std::string>> NamespaceRoots(const std::string& ns) override;
  absl::Status SetNamespaceRoots(const std::string& ns,
                                 const std::vector<std::string>& roots) override;
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceRoots() override;
  absl::StatusOr<std::vector<std::string>> NamespaceSources(const std::string& ns) override;
  absl::Status SetNamespaceSources(const std::string& ns,
                                   const std::vector<std::string>& sources) override;
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceSources() override;
  absl::Status AppendAudit(const AuditEntry& entry) override;
  absl::StatusOr<std::vector<AuditEntry>> ListAudit(int limit) override;
  absl::StatusOr<std::vector<AlarmRecord>> AlarmsOpenAt(const std::string& ns,
                                                        const std::string& run,
                                                        const std::string& probe_id,
                                                        int64_t step) override;
  absl::StatusOr<std::vector<AlarmRecord>> RecordAlarms(
      const std::vector<AlarmRecord>& fired, const std::vector<AlarmRecord>& resolutions) override;
  absl::StatusOr<AlarmList> ListAlarms(const AlarmQuery& query) override;
  absl::StatusOr<std::vector<StepScalars>> ScalarsBefore(const std::string& ns,
                                                         const std::string& run,
                                                         const std::string& probe_id,
                                                         const std::string& metric,
                                                         int64_t before_step, int steps) override;

 private:
  SqliteMetricsStore(std::unique_ptr<SqliteDb> db, std::unique_ptr<SqliteDb> version_db)
      : db_(std::move(db)), version_db_(std::move(version_db)) {}

  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  // A second connection that only reads PRAGMA data_version, which counts the commits of
  // every other connection, db_'s included.
  absl::Mutex version_mu_;
  std::unique_ptr<SqliteDb> version_db_ ABSL_GUARDED_BY(version_mu_);
  std::optional<Statement> version_statement_ ABSL_GUARDED_BY(version_mu_);  // prepared once
};

}  // namespace anisoscope::storage
