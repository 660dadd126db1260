#include "storage/sqlite_db.h"

#include <sqlite3.h>

#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace anisoscope::storage {
namespace {

// The start of a statement's SQL, enough to say which operation failed.
std::string Abbreviate(std::string_view sql) {
  constexpr size_t kMax = 80;
  std::string out;
  bool space = false;
  for (char c : sql) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
    if (out.size() >= kMax) return out + "...";
  }
  return out;
}

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kLittleEndian = false;
#else
constexpr bool kLittleEndian = true;
#endif

}  // namespace

// ---- Statement -----------------------------------------------------------------------

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

absl::Status Statement::BindError(int rc, int index) const {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return db_->Error(
      rc, absl::StrCat("bind parameter ", index, " of \"", Abbreviate(sqlite3_sql(stmt_)), "\""));
}

absl::Status Statement::Bind(int index, int64_t value) {
  return BindError(sqlite3_bind_int64(stmt_, index, value), index);
}

absl::Status Statement::Bind(int index, double value) {
  return BindError(sqlite3_bind_double(stmt_, index, value), index);
}

absl::Status Statement::Bind(int index, std::string_view text) {
  return BindError(
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

absl::Status Statement::Bind(int index, std::nullopt_t) {
  return BindError(sqlite3_bind_null(stmt_, index), index);
}

absl::Status Statement::BindBlob(int index, const void* data, size_t size) {
  return BindError(sqlite3_bind_blob64(stmt_, index, data, size, SQLITE_TRANSIENT), index);
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, absl::StrCat("\"", Abbreviate(sqlite3_sql(stmt_)), "\""));
}

absl::Status Statement::Run() {
  ASSIGN_OR_RETURN(const bool row, Step());
  if (row) {
    return absl::InternalError(
        absl::StrCat("\"", Abbreviate(sqlite3_sql(stmt_)), "\" returned a row; expected none"));
  }
  return absl::OkStatus();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::ColumnInt64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string_view Statement::ColumnBlob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  if (data == nullptr) return {};
  return std::string_view(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, column));
}

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

// ---- SqliteDb ------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const Options& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("database path is empty");
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(options.path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, options.path));
  if (rc != SQLITE_OK) return db->Error(rc, "open");
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);

  ASSIGN_OR_RETURN(Statement wal, db->Prepare("PRAGMA journal_mode=WAL"));
  ASSIGN_OR_RETURN(const bool row, wal.Step());
  const std::string mode = row ? absl::AsciiStrToLower(wal.ColumnText(0)) : "";
  if (mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", options.path, ": cannot switch to WAL journal mode (got '", mode, "')"));
  }
  RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  return db;
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

absl::Status SqliteDb::Error(int rc, std::string_view operation) const {
  const char* message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc), absl::StrCat("sqlite ", std::string(operation), " on ", path_,
                                                ": ", message, " (code ", rc, ")"));
}

absl::StatusOr<Statement> SqliteDb::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, absl::StrCat("prepare \"", Abbreviate(sql), "\""));
  }
  return Statement(this, stmt);
}

absl::Status SqliteDb::Exec(const std::string& sql) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, absl::StrCat("\"", Abbreviate(sql), "\""));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteDb::QueryInt64(const std::string& sql) {
  ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  ASSIGN_OR_RETURN(const bool row, stmt.Step());
  if (!row) {
    return absl::InternalError(
        absl::StrCat("\"", Abbreviate(sql), "\" returned no row on ", path_));
  }
  return stmt.ColumnInt64(0);
}

int64_t SqliteDb::Changes() const { return sqlite3_changes64(db_); }

int64_t SqliteDb::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

// ---- Transaction ---------------------------------------------------------------------

absl::StatusOr<Transaction> Transaction::Begin(SqliteDb* db) {
  RETURN_IF_ERROR(db->Exec("BEGIN IMMEDIATE"));
  return Transaction(db);
}

Transaction::~Transaction() {
  if (db_ != nullptr) db_->Exec("ROLLBACK").IgnoreError();
}

absl::Status Transaction::Commit() {
  SqliteDb* db = std::exchange(db_, nullptr);
  const absl::Status status = db->Exec("COMMIT");
  // A failed COMMIT leaves the transaction open (e.g. SQLITE_BUSY); undo it.
  if (!status.ok()) db->Exec("ROLLBACK").IgnoreError();
  return status;
}

// ---- Blobs ---------------------------------------------------------------------------

std::string EncodeFloat64s(const std::vector<double>& values) {
  std::string bytes(values.size() * sizeof(double), '\0');
  if (kLittleEndian) {
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t bits;
    std::memcpy(&bits, &values[i], sizeof(bits));
    for (int b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return bytes;
}

absl::StatusOr<std::vector<double>> DecodeFloat64s(std::string_view bytes) {
  if (bytes.size() % sizeof(double) != 0) {
    return absl::DataLossError(
        absl::StrCat("vector blob of ", bytes.size(), " bytes is not a whole number of float64"));
  }
  std::vector<double> values(bytes.size() / sizeof(double));
  if (kLittleEndian) {
    if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t bits = 0;
    for (int b = 0; b < 8; ++b) {
      bits |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i * 8 + b])) << (8 * b);
    }
    std::memcpy(&values[i], &bits, sizeof(bits));
  }
  return values;
}

}  // namespace anisoscope::storage
