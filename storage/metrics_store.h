// MetricsStore: the SQLite database (one file, WAL) shared by a team.
//
// Holds runs (each in a namespace), probes, jobs and their checkpoints, scalar series keyed
// by (namespace, run, probe, metric, step, layer, head), Q/K mean vectors, and who may do
// what: token hashes, each namespace's allowed roots and the audit log. The schema is versioned
// with PRAGMA user_version and migrated on Open. Thread-safe: calls are serialized on one
// connection. Every call blocks on SQLite I/O.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/job_store.h"
#include "storage/types.h"

namespace anisoscope::storage {

class MetricsStore : public JobStore {
 public:
  struct Options {
    // Database file; created with its directory's permissions when missing.
    std::string path;
    // How long a call waits for another process's write lock, in milliseconds.
    int busy_timeout_ms = 5000;
    // Run PRAGMA integrity_check on open and refuse a damaged file (DATA_LOSS).
    bool check_integrity = false;
    // A cap on the file's size in database pages (PRAGMA max_page_count; 0: none). A write
    // past it fails as a full disk does: RESOURCE_EXHAUSTED, nothing of it stored.
    int64_t max_pages = 0;
  };

  static absl::StatusOr<std::unique_ptr<MetricsStore>> Open(const Options& options);
  ~MetricsStore() override;

  // ---- Results ----
  // Writes all of a step in one transaction (run and probe created on first use). An
  // already stored step is replaced when `replace`, else ALREADY_EXISTS; either way a
  // step is stored whole or not at all.
  virtual absl::Status WriteStep(const StepResult& result, bool replace) = 0;

  // ---- Queries ----
  // Namespace `ns`'s runs by name.
  virtual absl::StatusOr<std::vector<RunInfo>> ListRuns(const std::string& ns) = 0;
  // One run of namespace `ns`: name, family, shape and creation time; probes and steps are
  // left empty (one row read, for checking queries). NOT_FOUND (listing the namespace's
  // runs) when unknown.
  virtual absl::StatusOr<RunInfo> GetRun(const std::string& ns, const std::string& run) = 0;
  // NOT_FOUND for an unknown run or probe; INVALID_ARGUMENT for an unknown metric (the
  // message lists the stored ones); FAILED_PRECONDITION when probe_id is empty and the run
  // has several probes (the message lists them).
  // With query.limit, the read stops at the limit and sets `more` when others match.
  virtual absl::StatusOr<SeriesResult> QuerySeries(const SeriesQuery& query) = 0;
  // What QuerySeries(query) would read, counted in SQL without reading a point (its limit
  // is ignored); the same errors.
  virtual absl::StatusOr<SeriesCounts> CountSeries(const SeriesQuery& query) = 0;
  // With query.max_values, the matching vectors' size is read first (from their stored
  // byte lengths, not their content) and none is read when they pass it.
  virtual absl::StatusOr<VectorResult> QueryVectors(const VectorQuery& query) = 0;
  // A number that changes whenever anything is committed to the database, by this store or
  // by another process; equal numbers mean nothing stored changed in between. Read on a
  // connection of its own, so it never waits for a query in progress (for caching answers).
  virtual absl::StatusOr<int64_t> DataVersion() = 0;

  // ---- Jobs (storage/job_store.h: CreateJob, GetJob, JobProbe, ListJobs, the changes of
  // a job and its checkpoints, FinishLease, HasStep, EarlierStepWithFingerprint, AppendAudit)
  // Jobs by state and the database's size, for monitoring.
  virtual absl::StatusOr<StoreStats> Stats() = 0;

  // ---- Alarms (storage/alarm_table.h) ----
  // The alarms of (ns, run, probe_id) that storing `step` may change: those firing, and those
  // resolved that fired at or before `step` and resolved at or after it; none for an unknown run.
  virtual absl::StatusOr<std::vector<AlarmRecord>> AlarmsOpenAt(const std::string& ns,
                                                                const std::string& run,
                                                                const std::string& probe_id,
                                                                int64_t step) = 0;
  // In one transaction, stores `fired` (keyed by run, probe, rule, layer and step: a stored
  // key is updated in place, never duplicated) and sets each of `resolutions` (by id) to its
  // resolved_step (nullopt: firing again); returns the changed alarms as stored, by revision.
  virtual absl::StatusOr<std::vector<AlarmRecord>> RecordAlarms(
      const std::vector<AlarmRecord>& fired, const std::vector<AlarmRecord>& resolutions) = 0;
  // Namespace query.ns's alarms (only query.run's unless it is empty; an unknown run has
  // none) changed after query.since_revision, by revision, at most query.limit (<= 0: 1000).
  virtual absl::StatusOr<AlarmList> ListAlarms(const AlarmQuery& query) = 0;
  // `metric` at the last `steps` stored steps of (ns, run, probe_id) before `before_step`,
  // most recent first.
  virtual absl::StatusOr<std::vector<StepScalars>> ScalarsBefore(
      const std::string& ns, const std::string& run, const std::string& probe_id,
      const std::string& metric, int64_t before_step, int steps) = 0;

  // ---- Access (storage/access_tables.h) ----
  virtual absl::StatusOr<TokenRecord> CreateToken(const TokenRecord& token) = 0;
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens(bool active_only) = 0;
  virtual absl::StatusOr<TokenRecord> RevokeToken(const std::string& name) = 0;
  virtual absl::Status TouchToken(int64_t id) = 0;
  virtual absl::StatusOr<std::vector<std::string>> NamespaceRoots(const std::string& ns) = 0;
  virtual absl::Status SetNamespaceRoots(const std::string& ns,
                                         const std::vector<std::string>& roots) = 0;
  virtual absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceRoots() = 0;
  virtual absl::StatusOr<std::vector<std::string>> NamespaceSources(const std::string& ns) = 0;
  virtual absl::Status SetNamespaceSources(const std::string& ns,
                                           const std::vector<std::string>& sources) = 0;
  virtual absl::StatusOr<std::map<std::string, std::vector<std::string>>>
  ListNamespaceSources() = 0;
  virtual absl::StatusOr<std::vector<AuditEntry>> ListAudit(int limit) = 0;

 protected:
  MetricsStore() = default;
};

}  // namespace anisoscope::storage
