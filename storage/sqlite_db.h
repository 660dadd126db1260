// SqliteDb and Statement: a thin RAII layer over the SQLite C API.
//
// Every failure becomes an absl::Status naming the SQL text and the database path.
// Not thread-safe: one SqliteDb (and its statements) is used by one thread at a time;
// callers serialize access (SqliteMetricsStore holds a mutex). Every call blocks on I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace anisoscope::storage {

class SqliteDb;

// A prepared statement. Move-only; finalized on destruction. Bind indices start at 1.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  absl::Status Bind(int index, int64_t value);
  absl::Status Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  absl::Status Bind(int index, double value);
  absl::Status Bind(int index, std::string_view text);
  absl::Status Bind(int index, const std::string& text) {
    return Bind(index, std::string_view(text));
  }
  absl::Status Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  absl::Status Bind(int index, std::nullopt_t);
  template <typename T>
  absl::Status Bind(int index, const std::optional<T>& value) {
    return value.has_value() ? Bind(index, *value) : Bind(index, std::nullopt);
  }
  absl::Status BindBlob(int index, const void* data, size_t size);

  // Binds `args` to parameters 1..N.
  template <typename... Args>
  absl::Status BindAll(const Args&... args) {
    int index = 0;
    absl::Status status;
    ((status.ok() ? (status = Bind(++index, args), 0) : 0), ...);
    return status;
  }

  // Advances: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps a statement that returns no rows (INSERT, UPDATE, DDL) to completion.
  absl::Status Run();
  // Clears the result and the bindings so the statement can run again.
  void Reset();

  int64_t ColumnInt64(int column) const;
  int ColumnInt(int column) const { return static_cast<int>(ColumnInt64(column)); }
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  std::string_view ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  friend class SqliteDb;
  Statement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  absl::Status BindError(int rc, int index) const;

  SqliteDb* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// One connection. Opening creates the file when missing.
class SqliteDb {
 public:
  struct Options {
    // Database file.
    std::string path;
    // How long a statement waits for another connection's lock, in milliseconds.
    int busy_timeout_ms = 5000;
  };

  // Opens the file and sets WAL, synchronous=NORMAL, foreign_keys=ON and the busy timeout.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const Options& options);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  absl::StatusOr<Statement> Prepare(std::string_view sql);
  // Runs one or more statements that return no rows.
  absl::Status Exec(const std::string& sql);
  // Runs a query with one integer result (e.g. "PRAGMA user_version").
  absl::StatusOr<int64_t> QueryInt64(const std::string& sql);

  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  int64_t LastInsertRowId() const;
  const std::string& path() const { return path_; }

  // The Status for SQLite result code `rc` while doing `operation` (usually SQL text).
  absl::Status Error(int rc, std::string_view operation) const;

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
};

// BEGIN IMMEDIATE on Begin; ROLLBACK on destruction unless committed.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(SqliteDb* db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  absl::Status Commit();

 private:
  explicit Transaction(SqliteDb* db) : db_(db) {}
  SqliteDb* db_;  // null once committed or rolled back
};

// The first column of every row of `sql` bound to `args`, as text.
template <typename... Args>
absl::StatusOr<std::vector<std::string>> TextColumn(SqliteDb* db, std::string_view sql,
                                                    const Args&... args) {
  absl::StatusOr<Statement> select = db->Prepare(sql);
  if (!select.ok()) return select.status();
  if (absl::Status status = select->BindAll(args...); !status.ok()) return status;
  std::vector<std::string> out;
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(select->ColumnText(0));
  }
}

// Doubles as little-endian float64 bytes and back.
std::string EncodeFloat64s(const std::vector<double>& values);
absl::StatusOr<std::vector<double>> DecodeFloat64s(std::string_view bytes);

// The current time as ISO 8601 UTC with milliseconds, in SQL (evaluated by SQLite).
inline constexpr char kNowSql[] = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

}  // namespace anisoscope::storage
