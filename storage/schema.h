// The database schema: an ordered list of migrations keyed by PRAGMA user_version.
//
// Migration i (1-based) takes the schema from version i-1 to i. Not thread-safe on one
// SqliteDb; safe across processes (each migration runs under BEGIN IMMEDIATE and
// re-reads user_version inside the transaction).
#pragma once

#include "absl/status/status.h"
#include "storage/sqlite_db.h"

namespace anisoscope::storage {

// The schema version this build writes and understands.
int LatestSchemaVersion();

// Brings the database up to `target_version` (default: the latest), applying the missing
// migrations in order in one transaction. FAILED_PRECONDITION when the file's
// user_version is newer than this build knows; INVALID_ARGUMENT for a bad target.
absl::Status MigrateSchema(SqliteDb* db, int target_version = -1);

}  // namespace anisoscope::storage
