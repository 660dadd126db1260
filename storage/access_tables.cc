#include "storage/access_tables.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace anisoscope::storage {
namespace {

constexpr char kSelectTokens[] =
    "SELECT id, name, namespace, role, sha256, created_at, last_used_at, revoked_at FROM tokens ";

TokenRecord TokenFromRow(const Statement& row) {
  TokenRecord token;
  token.id = row.ColumnInt64(0);
  token.name = row.ColumnText(1);
  token.ns = row.ColumnText(2);
  token.role = row.ColumnText(3);
  token.sha256 = row.ColumnText(4);
  token.created_at = row.ColumnText(5);
  token.last_used_at = row.ColumnText(6);
  token.revoked_at = row.ColumnText(7);
  return token;
}

absl::StatusOr<TokenRecord> TokenById(SqliteDb* db, int64_t id) {
  ASSIGN_OR_RETURN(Statement select, db->Prepare(absl::StrCat(kSelectTokens, "WHERE id = ?")));
  RETURN_IF_ERROR(select.BindAll(id));
  ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("token ", id, " not found"));
  return TokenFromRow(select);
}

}  // namespace

absl::StatusOr<TokenRecord> CreateTokenInDb(SqliteDb* db, const TokenRecord& token) {
  if (token.name.empty() || token.ns.empty()) {
    return absl::InvalidArgumentError("a token needs a name and a namespace");
  }
  const std::optional<Role> role = ParseRole(token.role);
  if (!role.has_value()) {
    std::vector<std::string> names = RoleNames();
    const std::string last = names.back();
    names.pop_back();
    return absl::InvalidArgumentError(absl::StrCat("token role must be ",
                                                   absl::StrJoin(names, ", "), " or ", last,
                                                   "; got '", token.role, "'"));
  }
  // The names of the callers that are not tokens, so that no token passes for one of them
  // (a lease is bound to its caller's name).
  if (token.name == "embedded" || token.name == "anonymous" || token.name.rfind("cert:", 0) == 0 ||
      token.name.rfind("host:", 0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token name '", token.name,
        "' is reserved (embedded, anonymous, cert:…, host:… name callers without tokens)"));
  }
  if (token.ns == kAnyNamespace && *role != Role::kWorker) {
    return absl::InvalidArgumentError(absl::StrCat(
        "namespace '", kAnyNamespace, "' (every namespace) is only for worker tokens; a ",
        token.role, " token belongs to one namespace"));
  }
  ASSIGN_OR_RETURN(Statement active,
                   db->Prepare("SELECT 1 FROM tokens WHERE name = ? AND revoked_at = ''"));
  RETURN_IF_ERROR(active.BindAll(token.name));
  ASSIGN_OR_RETURN(const bool exists, active.Step());
  if (exists) {
    return absl::AlreadyExistsError(absl::StrCat("an active token named '", token.name,
                                                 "' exists; revoke it first or pick another name"));
  }
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare(absl::StrCat(
                       "INSERT INTO tokens (name, namespace, role, sha256, created_at) VALUES "
                       "(?, ?, ?, ?, ",
                       kNowSql, ")")));
  RETURN_IF_ERROR(insert.BindAll(token.name, token.ns, token.role, token.sha256));
  RETURN_IF_ERROR(insert.Run());
  return TokenById(db, db->LastInsertRowId());
}

absl::StatusOr<std::vector<TokenRecord>> ListTokensInDb(SqliteDb* db, bool active_only) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat(
                       kSelectTokens, active_only ? "WHERE revoked_at = '' " : "", "ORDER BY id")));
  std::vector<TokenRecord> tokens;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    tokens.push_back(TokenFromRow(select));
  }
  return tokens;
}

absl::StatusOr<TokenRecord> RevokeTokenInDb(SqliteDb* db, const std::string& name) {
  ASSIGN_OR_RETURN(Statement update,
                   db->Prepare(absl::StrCat("UPDATE tokens SET revoked_at = ", kNowSql,
                                            " WHERE name = ? AND revoked_at = '' RETURNING id")));
  RETURN_IF_ERROR(update.BindAll(name));
  ASSIGN_OR_RETURN(const bool found, update.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no active token named '", name, "'"));
  const int64_t id = update.ColumnInt64(0);
  RETURN_IF_ERROR(update.Run());
  return TokenById(db, id);
}

absl::Status TouchTokenInDb(SqliteDb* db, int64_t id) {
  ASSIGN_OR_RETURN(
      Statement update,
      db->Prepare(absl::StrCat("UPDATE tokens SET last_used_at = ", kNowSql, " WHERE id = ?")));
  RETURN_IF_ERROR(update.BindAll(id));
  return update.Run();
}

namespace {

// A namespace's list in `table` (namespace_roots or namespace_sources), whose other column is
// `column`: names fixed here, never a caller's.
struct NamespaceList {
  const char* table;
  const char* column;
};
constexpr NamespaceList kRoots{"namespace_roots", "root"};
constexpr NamespaceList kSources{"namespace_sources", "source"};

absl::StatusOr<std::vector<std::string>> NamespaceListInDb(SqliteDb* db, NamespaceList list,
                                                           const std::string& ns) {
  return TextColumn(db,
                    absl::StrCat("SELECT ", list.column, " FROM ", list.table,
                                 " WHERE namespace = ? ORDER BY ", list.column),
                    ns);
}

absl::Status SetNamespaceListInDb(SqliteDb* db, NamespaceList list, const std::string& ns,
                                  const std::vector<std::string>& values) {
  if (ns.empty()) return absl::InvalidArgumentError("namespace is empty");
  ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ASSIGN_OR_RETURN(Statement clear,
                   db->Prepare(absl::StrCat("DELETE FROM ", list.table, " WHERE namespace = ?")));
  RETURN_IF_ERROR(clear.BindAll(ns));
  RETURN_IF_ERROR(clear.Run());
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare(absl::StrCat("INSERT OR IGNORE INTO ", list.table, " (namespace, ",
                                            list.column, ") VALUES (?, ?)")));
  for (const std::string& value : values) {
    insert.Reset();
    RETURN_IF_ERROR(insert.BindAll(ns, value));
    RETURN_IF_ERROR(insert.Run());
  }
  return transaction.Commit();
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceListInDb(
    SqliteDb* db, NamespaceList list) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare(absl::StrCat("SELECT namespace, ", list.column, " FROM ", list.table,
                                            " ORDER BY 1, 2")));
  std::map<std::string, std::vector<std::string>> out;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    out[select.ColumnText(0)].push_back(select.ColumnText(1));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> NamespaceRootsInDb(SqliteDb* db, const std::string& ns) {
  return NamespaceListInDb(db, kRoots, ns);
}

absl::Status SetNamespaceRootsInDb(SqliteDb* db, const std::string& ns,
                                   const std::vector<std::string>& roots) {
  return SetNamespaceListInDb(db, kRoots, ns, roots);
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceRootsInDb(
    SqliteDb* db) {
  return ListNamespaceListInDb(db, kRoots);
}

absl::StatusOr<std::vector<std::string>> NamespaceSourcesInDb(SqliteDb* db, const std::string& ns) {
  return NamespaceListInDb(db, kSources, ns);
}

absl::Status SetNamespaceSourcesInDb(SqliteDb* db, const std::string& ns,
                                     const std::vector<std::string>& sources) {
  return SetNamespaceListInDb(db, kSources, ns, sources);
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceSourcesInDb(
    SqliteDb* db) {
  return ListNamespaceListInDb(db, kSources);
}

absl::Status AppendAuditInDb(SqliteDb* db, const AuditEntry& entry) {
  ASSIGN_OR_RETURN(Statement insert,
                   db->Prepare(absl::StrCat("INSERT INTO audit (at, actor, namespace, action, "
                                            "target, detail) VALUES (",
                                            kNowSql, ", ?, ?, ?, ?, ?)")));
  RETURN_IF_ERROR(insert.BindAll(entry.actor, entry.ns, entry.action, entry.target, entry.detail));
  return insert.Run();
}

absl::StatusOr<std::vector<AuditEntry>> ListAuditInDb(SqliteDb* db, int limit) {
  ASSIGN_OR_RETURN(Statement select,
                   db->Prepare("SELECT id, at, actor, namespace, action, target, detail FROM "
                               "audit ORDER BY id DESC LIMIT ?"));
  RETURN_IF_ERROR(select.BindAll(limit > 0 ? static_cast<int64_t>(limit) : int64_t{-1}));
  std::vector<AuditEntry> entries;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    AuditEntry& entry = entries.emplace_back();
    entry.id = select.ColumnInt64(0);
    entry.at = select.ColumnText(1);
    entry.actor = select.ColumnText(2);
    entry.ns = select.ColumnText(3);
    entry.action = select.ColumnText(4);
    entry.target = select.ColumnText(5);
    entry.detail = select.ColumnText(6);
  }
  return entries;
}

}  // namespace anisoscope::storage
