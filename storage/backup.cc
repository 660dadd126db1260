#include "storage/backup.h"

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace anisoscope::storage {
namespace {

namespace fs = std::filesystem;

// Problems listed in an error before "and N more".
constexpr size_t kMaxListedProblems = 5;

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using SqliteHandle = std::unique_ptr<sqlite3, SqliteCloser>;

absl::StatusOr<SqliteHandle> OpenRaw(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  SqliteHandle handle(raw);
  if (rc != SQLITE_OK) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open ", path, ": ", raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(raw, 5000);
  return handle;
}

// Copies every page of `source` into `destination` in one step (one consistent snapshot).
absl::Status CopyPages(sqlite3* source, sqlite3* destination, const std::string& db_path) {
  sqlite3_backup* backup = sqlite3_backup_init(destination, "main", source, "main");
  if (backup == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot start a backup of ", db_path, ": ", sqlite3_errmsg(destination)));
  }
  int rc = sqlite3_backup_step(backup, -1);
  while (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    sqlite3_sleep(50);
    rc = sqlite3_backup_step(backup, -1);
  }
  const int finish = sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE || finish != SQLITE_OK) {
    return absl::InternalError(absl::StrCat(
        "backup of ", db_path, " failed: ", sqlite3_errstr(rc != SQLITE_DONE ? rc : finish)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckIntegrity(SqliteDb* db) {
  ASSIGN_OR_RETURN(Statement check, db->Prepare("PRAGMA integrity_check"));
  std::vector<std::string> problems;
  while (true) {
    absl::StatusOr<bool> row = check.Step();
    if (!row.ok()) {
      return absl::DataLossError(
          absl::StrCat("database ", db->path(), " is damaged and cannot be checked (",
                       row.status().message(), "); restore it from a backup"));
    }
    if (!*row) break;
    problems.push_back(check.ColumnText(0));
  }
  if (problems.size() == 1 && problems[0] == "ok") return absl::OkStatus();
  const size_t listed = std::min(problems.size(), kMaxListedProblems);
  std::string list = absl::StrJoin(problems.begin(), problems.begin() + listed, "; ");
  if (problems.size() > listed) absl::StrAppend(&list, "; and ", problems.size() - listed, " more");
  return absl::DataLossError(absl::StrCat("database ", db->path(),
                                          " is damaged (integrity_check: ", list,
                                          "); restore it from a backup "
                                          "(anisoscope-server backup writes them)"));
}

absl::Status BackupDatabase(const std::string& db_path, const std::string& out_path) {
  std::error_code error;
  if (!fs::is_regular_file(db_path, error)) {
    return absl::NotFoundError(absl::StrCat("database ", db_path, " does not exist"));
  }
  if (fs::exists(out_path, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("backup target ", out_path, " exists; pick a new name"));
  }
  const std::string partial = out_path + ".partial";
  fs::remove(partial, error);
  {
    ASSIGN_OR_RETURN(SqliteHandle source, OpenRaw(db_path, SQLITE_OPEN_READWRITE));
    ASSIGN_OR_RETURN(SqliteHandle destination,
                     OpenRaw(partial, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
    absl::Status copied = CopyPages(source.get(), destination.get(), db_path);
    if (!copied.ok()) {
      destination.reset();
      fs::remove(partial, error);
      return copied;
    }
  }
  absl::Status checked;
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> copy = SqliteDb::Open({partial, 5000});
    checked = copy.ok() ? CheckIntegrity(copy->get()) : copy.status();
  }
  if (checked.ok()) {
    fs::rename(partial, out_path, error);
    if (error) {
      checked = absl::InternalError(
          absl::StrCat("cannot rename ", partial, " to ", out_path, ": ", error.message()));
    }
  }
  if (!checked.ok()) {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(partial + suffix, error);
  }
  return checked;
}

}  // namespace anisoscope::storage
