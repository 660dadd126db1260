#include "storage/alarm_table.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::storage {
namespace {

constexpr char kSelectAlarms[] =
    "SELECT a.id, r.namespace, r.name, a.probe_id, a.rule, a.metric, a.layer, a.step, a.value, "
    "a.reference, a.severity, a.summary, a.fired_at, a.resolved_step, a.resolved_at, a.revision "
    "FROM alarms a JOIN runs r ON r.id = a.run_id ";

// A value SQLite stored as NULL (it has no NaN) reads back as NaN.
double DoubleOrNan(const Statement& row, int column) {
  return row.ColumnIsNull(column) ? std::numeric_limits<double>::quiet_NaN()
                                  : row.ColumnDouble(column);
}

AlarmRecord AlarmFromRow(const Statement& row) {
  AlarmRecord alarm;
  alarm.id = row.ColumnInt64(0);
  alarm.ns = row.ColumnText(1);
  alarm.run = row.ColumnText(2);
  alarm.probe_id = row.ColumnText(3);
  alarm.rule = row.ColumnText(4);
  alarm.metric = row.ColumnText(5);
  alarm.layer = row.ColumnInt(6);
  alarm.step = row.ColumnInt64(7);
  alarm.value = DoubleOrNan(row, 8);
  alarm.reference = DoubleOrNan(row, 9);
  alarm.severity = row.ColumnText(10);
  alarm.summary = row.ColumnText(11);
  alarm.fired_at = row.ColumnText(12);
  if (!row.ColumnIsNull(13)) alarm.resolved_step = row.ColumnInt64(13);
  alarm.resolved_at = row.ColumnText(14);
  alarm.revision = row.ColumnInt64(15);
  return alarm;
}

absl::StatusOr<std::vector<AlarmRecord>> ReadAlarms(Statement& select) {
  std::vector<AlarmRecord> alarms;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) return alarms;
    alarms.push_back(AlarmFromRow(select));
  }
}

absl::StatusOr<AlarmRecord> AlarmById(SqliteDb* db, int64_t id) {
  ASSIGN_OR_RETURN(Statement select, db->Prepare(absl::StrCat(kSelectAlarms, "WHERE a.id = ?")));
  RETURN_IF_ERROR(select.BindAll(id));
  ASSIGN_OR_RETURN(std::vector<AlarmRecord> alarms, ReadAlarms(select));
  if (alarms.empty()) return absl::NotFoundError(absl::StrCat("alarm ", id, " not found"));
  return alarms.front();
}

constexpr char kNextRevisionSql[] = "(SELECT COALESCE(MAX(revision), 0) + 1 FROM alarms)";

// Inserts `alarm`, or updates the alarm stored with its key (run, probe, rule, layer, step).
absl::StatusOr<AlarmRecord> UpsertAlarm(SqliteDb* db, const AlarmRecord& alarm) {
  ASSIGN_OR_RETURN(
      Statement upsert,
      db->Prepare(absl::StrCat(
          "INSERT INTO alarms (run_id, probe_id, rule, metric, layer, step, value, reference, "
          "severity, summary, fired_at, revision) SELECT id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
          kNowSql, ", ", kNextRevisionSql,
          " FROM runs WHERE namespace = ? AND name = ? "
          "ON CONFLICT (run_id, probe_id, rule, layer, step) DO UPDATE SET "
          "metric = excluded.metric, value = excluded.value, reference = excluded.reference, "
          "severity = excluded.severity, summary = excluded.summary, "
          "revision = excluded.revision RETURNING id")));
  RETURN_IF_ERROR(upsert.BindAll(alarm.probe_id, alarm.rule, alarm.metric, alarm.layer, alarm.step,
                                 alarm.value, alarm.reference, alarm.severity, alarm.summary,
                                 alarm.ns, alarm.run));
  ASSIGN_OR_RETURN(const bool row, upsert.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run '", alarm.run, "' not found"));
  const int64_t id = upsert.ColumnInt64(0);
  ASSIGN_OR_RETURN(const bool more, upsert.Step());
  if (more) return absl::InternalError("alarm upsert returned two rows");
  return AlarmById(db, id);
}

}  // namespace

absl::StatusOr<std::vector<AlarmRecord>> AlarmsOpenAtInDb(SqliteDb* db, const std::string& ns,
                                                          const std::string& run,
                                                          const std::string& probe_id,
                                                          int64_t step) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat(
                       kSelectAlarms,
                       "WHERE r.namespace = ? AND r.name = ? AND a.probe_id = ? AND "
                       "(a.resolved_step IS NULL OR (a.step <= ? AND a.resolved_step >= ?)) "
                       "ORDER BY a.revision")));
  RETURN_IF_ERROR(select.BindAll(ns, run, probe_id, step, step));
  return ReadAlarms(select);
}

absl::StatusOr<std::vector<AlarmRecord>> RecordAlarmsInDb(
    SqliteDb* db, const std::vector<AlarmRecord>& fired,
    const std::vector<AlarmRecord>& resolutions) {
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  std::vector<AlarmRecord> changed;
  for (const AlarmRecord& alarm : resolutions) {
    ASSIGN_OR_RETURN(
        Statement update,
        db->Prepare(absl::StrCat("UPDATE alarms SET resolved_step = ?1, resolved_at = CASE WHEN "
                                 "?1 IS NULL THEN '' ELSE ",
                                 kNowSql, " END, revision = ", kNextRevisionSql,
                                 " WHERE id = ?2 AND resolved_step IS NOT ?1")));
    RETURN_IF_ERROR(update.BindAll(alarm.resolved_step, alarm.id));
    RETURN_IF_ERROR(update.Run());
    if (db->Changes() == 0) continue;
    ASSIGN_OR_RETURN(AlarmRecord stored, AlarmById(db, alarm.id));
    changed.push_back(std::move(stored));
  }
  for (const AlarmRecord& alarm : fired) {
    ASSIGN_OR_RETURN(AlarmRecord stored, UpsertAlarm(db, alarm));
    changed.push_back(std::move(stored));
  }
  RETURN_IF_ERROR(transaction.Commit());
  return changed;
}

absl::StatusOr<AlarmList> ListAlarmsInDb(SqliteDb* db, const AlarmQuery& query) {
  std::string where = "WHERE r.namespace = ? AND a.revision > ? ";
  if (!query.run.empty()) absl::StrAppend(&where, "AND r.name = ? ");
  if (query.firing.has_value()) {
    absl::StrAppend(&where, *query.firing ? "AND a.resolved_step IS NULL "
                                          : "AND a.resolved_step IS NOT NULL ");
  }
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat(kSelectAlarms, where, "ORDER BY a.revision LIMIT ?")));
  // One more than the limit tells whether more match.
  const int64_t limit = query.limit > 0 ? query.limit : 1000;
  if (query.run.empty()) {
    RETURN_IF_ERROR(select.BindAll(query.ns, query.since_revision, limit + 1));
  } else {
    RETURN_IF_ERROR(select.BindAll(query.ns, query.since_revision, query.run, limit + 1));
  }
  AlarmList list;
  ASSIGN_OR_RETURN(list.alarms, ReadAlarms(select));
  if (static_cast<int64_t>(list.alarms.size()) > limit) {
    list.alarms.resize(limit);
    list.more = true;
  }
  return list;
}

absl::StatusOr<std::vector<StepScalars>> ScalarsBeforeInDb(SqliteDb* db, const std::string& ns,
                                                           const std::string& run,
                                                           const std::string& probe_id,
                                                           const std::string& metric,
                                                           int64_t before_step, int steps) {
  ASSIGN_OR_RETURN(
      Statement select,
      db->Prepare("WITH recent AS (SELECT s.id, s.step FROM steps s JOIN runs r ON r.id = s.run_id "
                  "WHERE r.namespace = ? AND r.name = ? AND s.probe_id = ? AND s.step < ? "
                  "ORDER BY s.step DESC LIMIT ?) "
                  "SELECT recent.step, v.layer, v.head, v.value FROM recent "
                  "JOIN series v ON v.step_id = recent.id "
                  "JOIN metrics m ON m.id = v.metric_id AND m.name = ? "
                  "ORDER BY recent.step DESC, v.layer, v.head"));
  RETURN_IF_ERROR(
      select.BindAll(ns, run, probe_id, before_step, static_cast<int64_t>(steps), metric));
  std::vector<StepScalars> history;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) return history;
    const int64_t step = select.ColumnInt64(0);
    if (history.empty() || history.back().step != step) history.push_back({step, {}});
    history.back().values.push_back(
        {metric, select.ColumnInt(1), select.ColumnInt(2), DoubleOrNan(select, 3)});
  }
}

}  // namespace anisoscope::storage
