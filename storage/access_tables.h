// Who may do what, in SQL: the `tokens` table (hashes only), the allowed roots of each
// namespace (`namespace_roots`) and the `audit` log.
//
// Free functions over one SqliteDb; not thread-safe (the caller serializes). Every call
// blocks on SQLite I/O. Timestamps are ISO 8601 UTC with a 'Z'.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite_db.h"
#include "storage/types.h"

namespace anisoscope::storage {

// Inserts an active token (name, ns, role, sha256 from `token`) and returns it as stored.
// ALREADY_EXISTS when an active token has that name; INVALID_ARGUMENT for an unknown role,
// for kAnyNamespace on a role other than worker, or for a name of a caller without a token
// ("embedded", "anonymous", "cert:…", "host:…").
absl::StatusOr<TokenRecord> CreateTokenInDb(SqliteDb* db, const TokenRecord& token);
// Every token, oldest first; only the active ones when `active_only`.
absl::StatusOr<std::vector<TokenRecord>> ListTokensInDb(SqliteDb* db, bool active_only);
// Revokes the active token named `name`; NOT_FOUND when there is none.
absl::StatusOr<TokenRecord> RevokeTokenInDb(SqliteDb* db, const std::string& name);
// Sets the token's last_used_at to now.
absl::Status TouchTokenInDb(SqliteDb* db, int64_t id);

// The allowed roots of namespace `ns` (empty: the server's own roots apply alone).
absl::StatusOr<std::vector<std::string>> NamespaceRootsInDb(SqliteDb* db, const std::string& ns);
// Replaces the allowed roots of `ns` (empty: removes them).
absl::Status SetNamespaceRootsInDb(SqliteDb* db, const std::string& ns,
                                   const std::vector<std::string>& roots);
// Every namespace that has roots, with them.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceRootsInDb(
    SqliteDb* db);

// The sources namespace `ns` may read (--allow-source entries, as the server's flag takes
// them; empty: the server's alone), replaced and listed as the roots are.
absl::StatusOr<std::vector<std::string>> NamespaceSourcesInDb(SqliteDb* db, const std::string& ns);
absl::Status SetNamespaceSourcesInDb(SqliteDb* db, const std::string& ns,
                                     const std::vector<std::string>& sources);
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ListNamespaceSourcesInDb(
    SqliteDb* db);

// Appends `entry` (its id and time are set by the database).
absl::Status AppendAuditInDb(SqliteDb* db, const AuditEntry& entry);
// The newest `limit` entries (<= 0: all), newest first.
absl::StatusOr<std::vector<AuditEntry>> ListAuditInDb(SqliteDb* db, int limit);

}  // namespace anisoscope::storage
