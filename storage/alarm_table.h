// Alarms in SQL: the `alarms` table (one row per firing of a rule for a run's layer, resolved
// in place) and the history of one metric that a rule compares a new step with.
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

// The alarms of (ns, run, probe_id) that are firing; none for an unknown run.
absl::StatusOr<std::vector<AlarmRecord>> FiringAlarmsInDb(SqliteDb* db, const std::string& ns,
                                                          const std::string& run,
                                                          const std::string& probe_id);

// In one transaction, inserts `fired` (their run must be stored; id, fired_at and revision
// are set by the store) and resolves the firing alarms `resolved` names by id at their
// resolved_step. Returns every changed alarm as stored, by revision. An alarm that is
// already resolved is left as it is and not returned.
absl::StatusOr<std::vector<AlarmRecord>> RecordAlarmsInDb(SqliteDb* db,
                                                          const std::vector<AlarmRecord>& fired,
                                                          const std::vector<AlarmRecord>& resolved);

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
