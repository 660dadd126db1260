// Who may do what. Roles permit actions (RoleMay is the one table); a request's caller
// (Principal) is resolved from its credentials: a bearer token (checked against the
// stored SHA-256 hashes), a worker's TLS client certificate, or the embedded workers' key.
// Every request acts in one namespace: the token's own, or, for admins and servers
// without tokens, the one the request names. A worker token's namespace is the one whose
// units it may lease, or '*' for every namespace (worker tokens made before scopes
// existed are migrated to '*').
//
// Thread-safe. Authorize reads the active tokens from the store (a short SQLite read) and
// records a token's use at most once a minute. `store` is not owned.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {

enum class AuthMode {
  kNone,    // no tokens: every caller may do everything (loopback only)
  kTokens,  // a valid bearer token (or a worker's client certificate) on every call
};

// The roles and their names live with the tokens table (storage/types.h).
using storage::ParseRole;
using storage::Role;
using storage::RoleName;
using storage::RoleNames;
enum class Action {
  kRead,   // list runs and jobs, query series, vectors and trajectories, watch jobs
  kWrite,  // submit and cancel jobs
  kWork,   // the worker service: lease, heartbeat, complete, fail
  kAdmin,  // the audit log
};

// The permission table: reader reads; writer reads and writes; worker works; admin all.
bool RoleMay(Role role, Action action);
// INVALID_ARGUMENT unless `ns` is 1-64 of [A-Za-z0-9._-].
absl::Status ValidateNamespace(std::string_view ns);

// What a request presents.
struct Credentials {
  std::string authorization;  // the Authorization header / metadata; empty when absent
  std::string ns;             // the namespace the request asks to act in; empty: default
  std::string client_cert;    // a verified TLS client certificate's common name; or empty
  bool embedded = false;      // carries this process's embedded workers' key
};

// The caller of one request.
struct Principal {
  std::string name;  // the token's name, "cert:CN", "embedded" or "anonymous"
  Role role = Role::kReader;
  std::string ns;  // the namespace the request acts in
  // Whose units a worker may lease: one namespace (a worker token made with --namespace NS),
  // or storage::kAnyNamespace (a worker token made with --namespace '*', a client
  // certificate, the embedded workers, admins, and every caller of a server without tokens).
  std::string work_scope = storage::kAnyNamespace;
};

class AccessControl {
 public:
  AccessControl(AuthMode mode, storage::MetricsStore* store) : mode_(mode), store_(store) {}

  // The caller of a request that wants to do `action`. UNAUTHENTICATED without valid
  // credentials (the message never contains the token), PERMISSION_DENIED when the role
  // may not do `action` or a non-admin names another namespace, INVALID_ARGUMENT for a
  // malformed namespace.
  absl::StatusOr<Principal> Authorize(const Credentials& credentials, Action action);

  AuthMode mode() const { return mode_; }

 private:
  absl::StatusOr<Principal> FromToken(const std::string& authorization);
  void NoteUse(int64_t token_id);

  const AuthMode mode_;
  storage::MetricsStore* const store_;
  absl::Mutex mu_;
  std::map<int64_t, absl::Time> last_noted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anisoscope::server
