#include "storage/schema.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::storage {
namespace {

// Append only: never edit a migration that has shipped; add a new one.
const std::vector<std::string>& Migrations() {
  static const auto* migrations = new std::vector<std::string>{
      // 1: results.
      R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  model_family TEXT NOT NULL,
  num_layers INTEGER NOT NULL,
  num_heads INTEGER NOT NULL,
  head_dim INTEGER NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE probes (
  id TEXT PRIMARY KEY,
  description TEXT NOT NULL,
  num_samples INTEGER NOT NULL,
  num_tokens INTEGER NOT NULL
);
CREATE TABLE steps (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  probe_id TEXT NOT NULL REFERENCES probes(id),
  step INTEGER NOT NULL,
  checkpoint_path TEXT NOT NULL,
  checkpoint_bytes INTEGER NOT NULL,
  seconds REAL NOT NULL,
  stored_at TEXT NOT NULL,
  UNIQUE (run_id, probe_id, step)
);
CREATE TABLE metrics (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);
CREATE TABLE series (
  step_id INTEGER NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
  metric_id INTEGER NOT NULL REFERENCES metrics(id),
  layer INTEGER NOT NULL,
  head INTEGER NOT NULL,
  value REAL,
  PRIMARY KEY (step_id, metric_id, layer, head)
) WITHOUT ROWID;
CREATE TABLE vectors (
  id INTEGER PRIMARY KEY,
  step_id INTEGER NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  layer INTEGER NOT NULL,
  head INTEGER NOT NULL,
  dim INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (step_id, kind, layer, head)
);
)sql",
      // 2: jobs and their checkpoints.
      R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  error TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE TABLE checkpoints (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  path TEXT NOT NULL,
  size_bytes INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL
    CHECK (state IN ('pending', 'running', 'done', 'skipped', 'failed', 'cancelled')),
  error TEXT NOT NULL DEFAULT '',
  probe_id TEXT NOT NULL DEFAULT '',
  seconds REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;
)sql",
      // 3: leases. `attempt` counts the leases of a step that may end it (a lease given
      // back does not count); `lease_id` is the current lease ('' when none), `lease_local`
      // marks a lease held by one of the server's embedded workers, `worker` its holder.
      R"sql(
ALTER TABLE checkpoints ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN lease_id TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN lease_local INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN worker TEXT NOT NULL DEFAULT '';
)sql",
      // 4: a team's database. Runs and jobs belong to a namespace (existing ones to
      // 'default'; run names are unique per namespace, so `runs` is rebuilt with foreign
      // keys off); bearer tokens stored as SHA-256 hashes (one active token per name);
      // allowed roots per namespace; the audit log.
      R"sql(
CREATE TABLE runs_v4 (
  id INTEGER PRIMARY KEY,
  namespace TEXT NOT NULL,
  name TEXT NOT NULL,
  model_family TEXT NOT NULL,
  num_layers INTEGER NOT NULL,
  num_heads INTEGER NOT NULL,
  head_dim INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (namespace, name)
);
INSERT INTO runs_v4 (id, namespace, name, model_family, num_layers, num_heads, head_dim,
                     created_at)
  SELECT id, 'default', name, model_family, num_layers, num_heads, head_dim, created_at
  FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
ALTER TABLE jobs ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
CREATE INDEX jobs_by_namespace ON jobs (namespace, id);
CREATE TABLE tokens (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  namespace TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('reader', 'writer', 'worker', 'admin')),
  sha256 TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  last_used_at TEXT NOT NULL DEFAULT '',
  revoked_at TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at = '';
CREATE TABLE namespace_roots (
  namespace TEXT NOT NULL,
  root TEXT NOT NULL,
  PRIMARY KEY (namespace, root)
) WITHOUT ROWID;
CREATE TABLE audit (
  id INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  actor TEXT NOT NULL,
  namespace TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT ''
);
)sql",
      // 5: checkpoint fingerprints (a content hash of the weight files) per stored step, and
      // per job checkpoint with the earlier step of the run that has the same one (-1: none).
      R"sql(
ALTER TABLE steps ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
CREATE INDEX steps_by_fingerprint ON steps (run_id, fingerprint) WHERE fingerprint != '';
ALTER TABLE checkpoints ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN duplicate_of INTEGER NOT NULL DEFAULT -1;
)sql",
      // 6: walls around workers. Probes belong to a namespace (keyed by (namespace, id); a
      // probe used by two namespaces becomes one row in each, and `steps` is rebuilt without
      // its reference to the old single-column key, with foreign keys off); a lease records
      // the identity that took it (`lease_holder`: a token's name, "cert:CN", "embedded" or
      // "anonymous"; '' for leases taken before, adopted by the first identity that uses
      // them); worker tokens made before served every namespace and keep doing so ('*').
      R"sql(
CREATE TABLE probes_v6 (
  namespace TEXT NOT NULL,
  id TEXT NOT NULL,
  description TEXT NOT NULL,
  num_samples INTEGER NOT NULL,
  num_tokens INTEGER NOT NULL,
  PRIMARY KEY (namespace, id)
) WITHOUT ROWID;
INSERT INTO probes_v6 (namespace, id, description, num_samples, num_tokens)
  SELECT DISTINCT r.namespace, p.id, p.description, p.num_samples, p.num_tokens
  FROM probes p JOIN steps s ON s.probe_id = p.id JOIN runs r ON r.id = s.run_id;
DROP TABLE probes;
ALTER TABLE probes_v6 RENAME TO probes;
CREATE TABLE steps_v6 (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  probe_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  checkpoint_path TEXT NOT NULL,
  checkpoint_bytes INTEGER NOT NULL,
  seconds REAL NOT NULL,
  stored_at TEXT NOT NULL,
  fingerprint TEXT NOT NULL DEFAULT '',
  UNIQUE (run_id, probe_id, step)
);
INSERT INTO steps_v6 (id, run_id, probe_id, step, checkpoint_path, checkpoint_bytes, seconds,
                      stored_at, fingerprint)
  SELECT id, run_id, probe_id, step, checkpoint_path, checkpoint_bytes, seconds, stored_at,
         fingerprint
  FROM steps;
DROP TABLE steps;
ALTER TABLE steps_v6 RENAME TO steps;
CREATE INDEX steps_by_fingerprint ON steps (run_id, fingerprint) WHERE fingerprint != '';
ALTER TABLE checkpoints ADD COLUMN lease_holder TEXT NOT NULL DEFAULT '';
UPDATE tokens SET namespace = '*' WHERE role = 'worker';
)sql",
      // 7: training-health alarms (server/alarms/): one row per firing of a rule for a run's
      // layer (-1: over all), resolved in place; `revision` orders every change for pollers.
      R"sql(
CREATE TABLE alarms (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  probe_id TEXT NOT NULL,
  rule TEXT NOT NULL,
  metric TEXT NOT NULL,
  layer INTEGER NOT NULL,
  step INTEGER NOT NULL,
  value REAL,
  reference REAL,
  severity TEXT NOT NULL,
  summary TEXT NOT NULL,
  fired_at TEXT NOT NULL,
  resolved_step INTEGER,
  resolved_at TEXT NOT NULL DEFAULT '',
  revision INTEGER NOT NULL UNIQUE
);
CREATE INDEX alarms_firing ON alarms (run_id, probe_id) WHERE resolved_step IS NULL;
)sql",
      // 8: the probe a job's units carry, fixed at submit (a resumed job keeps it, whatever
      // became of the file it was read from); none for jobs stored before.
      R"sql(
CREATE TABLE job_probes (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  unit_probe BLOB NOT NULL
);
)sql",
      // 9: one alarm per event, (run, probe, rule, layer, step fired): a --force re-run
      // updates it in place. The duplicates re-runs stored before are folded into the most
      // recently changed row of each event, which takes the resolution recorded last among
      // them (firing if none resolved) and a new revision so that pollers see it.
      R"sql(
CREATE TEMP TABLE alarm_folds AS
SELECT run_id, probe_id, rule, layer, step, id, last_resolved_step, last_resolved_at,
       (SELECT COALESCE(MAX(revision), 0) FROM alarms) + ROW_NUMBER() OVER (ORDER BY id)
         AS new_revision
FROM (SELECT run_id, probe_id, rule, layer, step, id,
             COUNT(*) OVER event AS copies,
             FIRST_VALUE(id) OVER (event ORDER BY revision DESC) AS latest_id,
             FIRST_VALUE(resolved_step)
               OVER (event ORDER BY resolved_step IS NULL, revision DESC) AS last_resolved_step,
             FIRST_VALUE(resolved_at)
               OVER (event ORDER BY resolved_step IS NULL, revision DESC) AS last_resolved_at
      FROM alarms
      WINDOW event AS (PARTITION BY run_id, probe_id, rule, layer, step))
WHERE copies > 1 AND id = latest_id;
DELETE FROM alarms WHERE EXISTS (
  SELECT 1 FROM alarm_folds f
  WHERE f.run_id = alarms.run_id AND f.probe_id = alarms.probe_id AND f.rule = alarms.rule AND
        f.layer = alarms.layer AND f.step = alarms.step AND f.id != alarms.id);
UPDATE alarms SET resolved_step = f.last_resolved_step, resolved_at = f.last_resolved_at,
                  revision = f.new_revision
FROM alarm_folds f WHERE alarms.id = f.id;
DROP TABLE temp.alarm_folds;
CREATE UNIQUE INDEX alarms_event ON alarms (run_id, probe_id, rule, layer, step);
)sql",
      // 10: checkpoints from where they live (issue 38). A job's source and each checkpoint's
      // remote descriptor, opaque bytes the server serialized (empty: folders), with its
      // revision and commit as text (shown without parsing the descriptor); where each
      // stored step was read from; the sources each namespace may read (none: the server's).
      R"sql(
ALTER TABLE jobs ADD COLUMN source BLOB NOT NULL DEFAULT x'';
ALTER TABLE checkpoints ADD COLUMN remote BLOB NOT NULL DEFAULT x'';
ALTER TABLE checkpoints ADD COLUMN remote_revision TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN remote_commit TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN origin_source TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN origin_revision TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN origin_commit TEXT NOT NULL DEFAULT '';
CREATE TABLE namespace_sources (
  namespace TEXT NOT NULL,
  source TEXT NOT NULL,
  PRIMARY KEY (namespace, source)
) WITHOUT ROWID;
)sql",
  };
  return *migrations;
}

// PRAGMA application_id of an anisoscope database ("anis"); files written before it was set
// have 0 and are recognised by their tables.
constexpr int64_t kApplicationId = 0x616E6973;

// The names of the tables in `db`, comma-separated ("" when none).
absl::StatusOr<std::string> TableNames(SqliteDb* db) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                               "name NOT LIKE 'sqlite_%' ORDER BY name"));
  std::string names;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) return names;
    absl::StrAppend(&names, names.empty() ? "" : ", ", select.ColumnText(0));
  }
}

// FAILED_PRECONDITION unless `db` is empty, ours (our application_id), or an anisoscope file
// from before the application_id (version > 0 with our runs and steps tables): another
// program's database is never migrated into.
absl::Status CheckOwnership(SqliteDb* db, int64_t version) {
  ASSIGN_OR_RETURN(const int64_t application_id, db->QueryInt64("PRAGMA application_id"));
  if (application_id == kApplicationId) return absl::OkStatus();
  if (application_id != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", db->path(), " belongs to another program (PRAGMA application_id ",
        application_id, "), not anisoscope; give --db a file of its own"));
  }
  ASSIGN_OR_RETURN(const std::string tables, TableNames(db));
  const bool empty = tables.empty();
  const bool ours = absl::StrContains(absl::StrCat(", ", tables, ","), ", runs,") &&
                    absl::StrContains(absl::StrCat(", ", tables, ","), ", steps,");
  if ((version == 0 && empty) || (version > 0 && ours)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "database ", db->path(), " is not an anisoscope database (schema version ", version,
      empty ? ", no tables" : absl::StrCat(", tables ", tables),
      "); give --db a new file or one anisoscope wrote"));
}

// Applies the migrations from the file's version up to `target_version` in one transaction.
absl::Status MigrateInTransaction(SqliteDb* db, int target_version) {
  const int latest = LatestSchemaVersion();
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ASSIGN_OR_RETURN(const int64_t current, db->QueryInt64("PRAGMA user_version"));
  RETURN_IF_ERROR(CheckOwnership(db, current));
  if (current > latest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", db->path(), " has schema version ", current,
        ", newer than the latest this build knows (", latest, "); upgrade anisoscope to open it"));
  }
  RETURN_IF_ERROR(db->Exec(absl::StrCat("PRAGMA application_id = ", kApplicationId)));
  if (current >= target_version) return transaction.Commit();
  for (int version = static_cast<int>(current) + 1; version <= target_version; ++version) {
    const absl::Status status = db->Exec(Migrations()[version - 1]);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("schema migration to version ", version,
                                                      " failed: ", status.message()));
    }
  }
  ASSIGN_OR_RETURN(Statement check, db->Prepare("PRAGMA foreign_key_check"));
  ASSIGN_OR_RETURN(const bool dangling, check.Step());
  if (dangling) {
    return absl::DataLossError(absl::StrCat("schema migration of ", db->path(), " to version ",
                                            target_version, " left a dangling reference in table ",
                                            check.ColumnText(0)));
  }
  RETURN_IF_ERROR(db->Exec(absl::StrCat("PRAGMA user_version = ", target_version)));
  return transaction.Commit();
}

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

absl::Status MigrateSchema(SqliteDb* db, int target_version) {
  const int latest = LatestSchemaVersion();
  if (target_version < 0) target_version = latest;
  if (target_version > latest) {
    return absl::InvalidArgumentError(absl::StrCat("schema version ", target_version,
                                                   " requested; this build knows up to ", latest));
  }
  // Migrations that rebuild a table need foreign keys off (a DROP TABLE would otherwise
  // cascade); the pragma is a no-op inside a transaction, so it is set around it and the
  // keys are checked before the commit.
  RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=OFF"));
  const absl::Status status = MigrateInTransaction(db, target_version);
  RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
  return status;
}

}  // namespace anisoscope::storage
