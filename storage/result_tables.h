// Results in SQL: writing a step (runs, probes, steps, metrics, series, vectors) and
// reading series, vectors and the run catalogue back.
//
// Free functions over one SqliteDb; not thread-safe (the caller serializes). Every call
// blocks on SQLite I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite_db.h"
#include "storage/types.h"

namespace anisoscope::storage {

// True when (ns, run, probe_id, step) is stored.
absl::StatusOr<bool> HasStepInDb(SqliteDb* db, const std::string& ns, const std::string& run,
                                 const std::string& probe_id, int64_t step);
// The earliest stored step of (ns, run) before `step` whose weights have `fingerprint`;
// -1 when none (or `fingerprint` is empty).
absl::StatusOr<int64_t> EarlierStepWithFingerprintInDb(SqliteDb* db, const std::string& ns,
                                                       const std::string& run,
                                                       const std::string& fingerprint,
                                                       int64_t step);

// Writes a whole step in one BEGIN IMMEDIATE transaction; on any error nothing changes.
// INVALID_ARGUMENT for an empty run/probe/metric name or an architecture that differs
// from the run's stored one; ALREADY_EXISTS for a stored step unless `replace`.
absl::Status WriteStepToDb(SqliteDb* db, const StepResult& result, bool replace);
// The same inside the caller's transaction (which a failure leaves to be rolled back).
absl::Status WriteStepInTransaction(SqliteDb* db, const StepResult& result, bool replace);

// Every run of namespace `ns` by name, with its probes and distinct steps.
absl::StatusOr<std::vector<RunInfo>> ListRunsInDb(SqliteDb* db, const std::string& ns);
// Run `run` of namespace `ns`: its name, family, shape and creation time, without its
// probes and steps (one row read); NOT_FOUND listing the namespace's runs.
absl::StatusOr<RunInfo> GetRunFromDb(SqliteDb* db, const std::string& ns, const std::string& run);

// See MetricsStore::QuerySeries / CountSeries / QueryVectors.
absl::StatusOr<SeriesResult> QuerySeriesInDb(SqliteDb* db, const SeriesQuery& query);
absl::StatusOr<SeriesCounts> CountSeriesInDb(SqliteDb* db, const SeriesQuery& query);
absl::StatusOr<VectorResult> QueryVectorsInDb(SqliteDb* db, const VectorQuery& query);

}  // namespace anisoscope::storage
