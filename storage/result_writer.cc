// WriteStepToDb, WriteStepInTransaction, HasStepInDb and EarlierStepWithFingerprintInDb
// (declared in storage/result_tables.h).
#include <cmath>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/result_tables.h"

namespace anisoscope::storage {
namespace {

absl::Status Validate(const StepResult& result) {
  if (result.run.empty()) return absl::InvalidArgumentError("step result has an empty run name");
  if (result.ns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", result.step, " of run ", result.run, " has an empty namespace"));
  }
  if (result.probe.id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", result.step, " of run ", result.run, " has an empty probe id"));
  }
  for (const ScalarValue& scalar : result.scalars) {
    if (scalar.metric.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", result.step, " of run ", result.run, " has an unnamed scalar"));
    }
  }
  for (const VectorValue& vector : result.vectors) {
    if (vector.kind.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", result.step, " of run ", result.run, " has a vector without kind"));
    }
  }
  return absl::OkStatus();
}

std::string Architecture(const std::string& family, int layers, int heads, int head_dim) {
  return absl::StrCat(family, " ", layers, " layers x ", heads, " heads, head_dim ", head_dim);
}

// The run's id, inserting it on first use; INVALID_ARGUMENT on an architecture mismatch.
absl::StatusOr<int64_t> UpsertRun(SqliteDb* db, const StepResult& result) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT id, model_family, num_layers, num_heads, head_dim FROM runs "
                               "WHERE namespace = ? AND name = ?"));
  RETURN_IF_ERROR(select.BindAll(result.ns, result.run));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (found) {
    const std::string stored = Architecture(select.ColumnText(1), select.ColumnInt(2),
                                            select.ColumnInt(3), select.ColumnInt(4));
    const std::string given =
        Architecture(result.model_family, result.num_layers, result.num_heads, result.head_dim);
    if (stored != given) {
      return absl::InvalidArgumentError(absl::StrCat("run ", result.run, " is stored as ", stored,
                                                     "; step ", result.step, " is ", given));
    }
    return select.ColumnInt64(0);
  }
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare(absl::StrCat("INSERT INTO runs (namespace, name, model_family, "
                                            "num_layers, num_heads, head_dim, created_at) VALUES "
                                            "(?, ?, ?, ?, ?, ?, ",
                                            kNowSql, ")")));
  RETURN_IF_ERROR(insert.BindAll(result.ns, result.run, result.model_family, result.num_layers,
                                 result.num_heads, result.head_dim));
  RETURN_IF_ERROR(insert.Run());
  return db->LastInsertRowId();
}

// Probes are per namespace: another namespace's probe of the same id is never touched.
absl::Status UpsertProbe(SqliteDb* db, const std::string& ns, const ProbeInfo& probe) {
  ASSIGN_OR_RETURN(
      Statement upsert,
      db->Prepare("INSERT INTO probes (namespace, id, description, num_samples, num_tokens) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, id) DO UPDATE SET "
                  "description = excluded.description, num_samples = excluded.num_samples, "
                  "num_tokens = excluded.num_tokens"));
  RETURN_IF_ERROR(
      upsert.BindAll(ns, probe.id, probe.description, probe.num_samples, probe.num_tokens));
  return upsert.Run();
}

// Ids of the result's metric names, inserting the new ones.
absl::StatusOr<absl::flat_hash_map<std::string, int64_t>> MetricIds(
    SqliteDb* db, const std::vector<ScalarValue>& scalars) {
  absl::flat_hash_map<std::string, int64_t> ids;
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare("INSERT INTO metrics (name) VALUES (?) ON CONFLICT DO NOTHING"));
  ASSIGN_OR_RETURN(Statement select, db->Prepare("SELECT id FROM metrics WHERE name = ?"));
  for (const ScalarValue& scalar : scalars) {
    if (ids.contains(scalar.metric)) continue;
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(scalar.metric));
    RETURN_IF_ERROR(insert.Run());
    select.Reset();
    RETURN_IF_ERROR(select.BindAll(scalar.metric));
    ASSIGN_OR_RETURN(const bool found, select.Step());
    if (!found) return absl::InternalError(absl::StrCat("metric ", scalar.metric, " vanished"));
    ids[scalar.metric] = select.ColumnInt64(0);
  }
  return ids;
}

// Deletes a stored (run, probe, step) when `replace`, else ALREADY_EXISTS.
absl::Status ClearStep(SqliteDb* db, int64_t run_id, const StepResult& result, bool replace) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT id FROM steps WHERE run_id = ? AND probe_id = ? AND "
                               "step = ?"));
  RETURN_IF_ERROR(select.BindAll(run_id, result.probe.id, result.step));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) return absl::OkStatus();
  if (!replace) {
    return absl::AlreadyExistsError(absl::StrCat("step ", result.step, " of run ", result.run,
                                                 " with probe ", result.probe.id,
                                                 " is already stored"));
  }
  ASSIGN_OR_RETURN(Statement remove, db->Prepare("DELETE FROM steps WHERE id = ?"));
  RETURN_IF_ERROR(remove.BindAll(select.ColumnInt64(0)));
  return remove.Run();
}

absl::Status InsertScalars(SqliteDb* db, int64_t step_id, const StepResult& result) {
  ASSIGN_OR_RETURN(const auto metric_ids, MetricIds(db, result.scalars));
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare("INSERT INTO series (step_id, metric_id, layer, head, value) "
                               "VALUES (?, ?, ?, ?, ?)"));
  for (const ScalarValue& scalar : result.scalars) {
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(step_id, metric_ids.at(scalar.metric), scalar.layer, scalar.head,
                                   scalar.value));
    const absl::Status status = insert.Run();
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("scalar ", scalar.metric, " (layer ", scalar.layer, ", head ", scalar.head,
                       ") of step ", result.step, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status InsertVectors(SqliteDb* db, int64_t step_id, const StepResult& result) {
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare("INSERT INTO vectors (step_id, kind, layer, head, dim, data) "
                               "VALUES (?, ?, ?, ?, ?, ?)"));
  std::string bytes;
  for (const VectorValue& vector : result.vectors) {
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(step_id, vector.kind, vector.layer, vector.head,
                                   static_cast<int64_t>(vector.values.size())));
    bytes = EncodeFloat64s(vector.values);
    RETURN_IF_ERROR(insert.BindBlob(6, bytes.data(), bytes.size()));
    const absl::Status status = insert.Run();
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("vector ", vector.kind, " (layer ", vector.layer, ", head ", vector.head,
                       ") of step ", result.step, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> HasStepInDb(SqliteDb* db, const std::string& ns, const std::string& run,
                                 const std::string& probe_id, int64_t step) {
  ASSIGN_OR_RETURN(
      Statement select,
      db->Prepare("SELECT 1 FROM steps s JOIN runs r ON r.id = s.run_id "
                  "WHERE r.namespace = ? AND r.name = ? AND s.probe_id = ? AND s.step = ?"));
  RETURN_IF_ERROR(select.BindAll(ns, run, probe_id, step));
  return select.Step();
}

absl::StatusOr<int64_t> EarlierStepWithFingerprintInDb(SqliteDb* db, const std::string& ns,
                                                       const std::string& run,
                                                       const std::string& fingerprint,
                                                       int64_t step) {
  if (fingerprint.empty()) return -1;
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT MIN(s.step) FROM steps s JOIN runs r ON r.id = s.run_id "
                               "WHERE r.namespace = ? AND r.name = ? AND s.fingerprint = ? AND "
                               "s.step < ?"));
  RETURN_IF_ERROR(select.BindAll(ns, run, fingerprint, step));
  ASSIGN_OR_RETURN(const bool row, select.Step());
  return row && !select.ColumnIsNull(0) ? select.ColumnInt64(0) : int64_t{-1};
}

absl::Status WriteStepToDb(SqliteDb* db, const StepResult& result, bool replace) {
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  RETURN_IF_ERROR(WriteStepInTransaction(db, result, replace));
  return transaction.Commit();
}

absl::Status WriteStepInTransaction(SqliteDb* db, const StepResult& result, bool replace) {
  RETURN_IF_ERROR(Validate(result));
  ASSIGN_OR_RETURN(const int64_t run_id, UpsertRun(db, result));
  RETURN_IF_ERROR(UpsertProbe(db, result.ns, result.probe));
  RETURN_IF_ERROR(ClearStep(db, run_id, result, replace));

  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare(absl::StrCat("INSERT INTO steps (run_id, probe_id, step, "
                                            "checkpoint_path, checkpoint_bytes, seconds, "
                                            "fingerprint, origin_source, origin_revision, "
                                            "origin_commit, stored_at) "
                                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
                                            kNowSql, ")")));
  RETURN_IF_ERROR(insert.BindAll(run_id, result.probe.id, result.step, result.checkpoint_path,
                                 result.checkpoint_bytes, result.seconds, result.fingerprint,
                                 result.origin_source, result.origin_revision,
                                 result.origin_commit));
  RETURN_IF_ERROR(insert.Run());
  const int64_t step_id = db->LastInsertRowId();

  RETURN_IF_ERROR(InsertScalars(db, step_id, result));
  return InsertVectors(db, step_id, result);
}

}  // namespace anisoscope::storage
