// Alarms in SQL: the `alarms` table (one row per event: a rule firing for a run's probe and
// layer at a step, unique on (run, probe, rule, layer, step) and resolved in place) and the
// history of one metric that a rule compares a new step with.
//
// Free functions over one SqliteDb; not thread-safe (the caller serializes). Every call
// blocks on SQLite I/O. Timestamps are ISO 8601 UTC with a 'Z'.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/sqlite_db.h"
#include "storage/types.h"

namespace anisoscope::storage {

// The alarms of (ns, run, probe_id) that storing `step` may change, by revision: those
// firing (fired at any step) and those resolved whose span holds `step` (fired at or before
// it, resolved at or after it); none for an unknown run.
absl::StatusOr<std::vector<AlarmRecord>> AlarmsOpenAtInDb(SqliteDb* db, const std::string& ns,
                                                          const std::string& run,
                                                          const std::string& probe_id,
                                                          int64_t step);

// In one transaction, stores `fired` and `resolutions`; returns every changed alarm as
// stored, by revision.
// - A fired alarm (its run must be stored) is keyed by (run, probe, rule, layer, step): a new
//   key is inserted (id, fired_at and revision set by the store); a stored one is updated in
//   place (metric, value, reference, severity, summary, a new revision), keeping its id,
//   fired_at and resolution.
// - Each of `resolutions` sets the alarm it names by id to its resolved_step (nullopt: firing
//   again) with a new revision; one whose resolution already is that is left as it is and
//   not returned.
absl::StatusOr<std::vector<AlarmRecord>> RecordAlarmsInDb(
    SqliteDb* db, const std::vector<AlarmRecord>& fired,
    const std::vector<AlarmRecord>& resolutions);

// See MetricsStore::ListAlarms.
absl::StatusOr<AlarmList> ListAlarmsInDb(SqliteDb* db, const AlarmQuery& query);

// The values of `metric` at the last `steps` stored steps of (ns, run, probe_id) before
// `before_step`, most recent first; a step without the metric is left out.
absl::StatusOr<std::vector<StepScalars>> ScalarsBeforeInDb(SqliteDb* db, const std::string& ns,
                                                           const std::string& run,
                                                           const std::string& probe_id,
                                                           const std::string& metric,
                                                           int64_t before_step, int steps);

}  // namespace anisoscope::storage
