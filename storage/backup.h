// Backups and integrity checks of the database file.
//
// Blocking file I/O; safe while another process (the server) writes the database.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "storage/sqlite_db.h"

namespace anisoscope::storage {

// Copies database `db_path` to `out_path` with SQLite's online backup API: a consistent
// snapshot even while a server writes (WAL readers do not block writers). The copy is
// written beside `out_path` as OUT.partial, passes integrity_check, and only then takes
// its name, so `out_path` is never a half-written file. NOT_FOUND when `db_path` does not
// exist; FAILED_PRECONDITION when `out_path` exists.
absl::Status BackupDatabase(const std::string& db_path, const std::string& out_path);

// PRAGMA integrity_check; DATA_LOSS naming the file and its first problems when it is
// not "ok", with the way out (restore a backup).
absl::Status CheckIntegrity(SqliteDb* db);

}  // namespace anisoscope::storage
