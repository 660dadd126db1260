#include "server/auth/access_control.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/auth/bearer_token.h"

namespace anisoscope::server {
namespace {

// How often a token's last_used_at is written.
constexpr absl::Duration kUseNotedEvery = absl::Minutes(1);
constexpr size_t kMaxNamespaceLength = 64;

const char* ActionText(Action action) {
  switch (action) {
    case Action::kRead:
      return "read runs and jobs";
    case Action::kWrite:
      return "submit or cancel jobs";
    case Action::kWork:
      return "use the worker service";
    case Action::kAdmin:
      return "read the audit log";
  }
  return "do that";
}

}  // namespace

bool RoleMay(Role role, Action action) {
  switch (role) {
    case Role::kReader:
      return action == Action::kRead;
    case Role::kWriter:
      return action == Action::kRead || action == Action::kWrite;
    case Role::kWorker:
      return action == Action::kWork;
    case Role::kAdmin:
      return true;
  }
  return false;
}

absl::Status ValidateNamespace(std::string_view ns) {
  bool ok = !ns.empty() && ns.size() <= kMaxNamespaceLength;
  for (const char c : ns) ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("namespace '", std::string(ns), "' is not 1-",
                                                   kMaxNamespaceLength, " of A-Z a-z 0-9 . _ -"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Principal> AccessControl::Authorize(const Credentials& credentials, Action action) {
  if (!credentials.ns.empty()) RETURN_IF_ERROR(ValidateNamespace(credentials.ns));
  Principal principal;
  if (credentials.embedded) {
    principal = {"embedded", Role::kWorker, "", storage::kAnyNamespace};
  } else if (mode_ == AuthMode::kNone) {
    principal = {"anonymous", Role::kAdmin, "", storage::kAnyNamespace};
  } else if (!credentials.authorization.empty()) {
    ASSIGN_OR_RETURN(principal, FromToken(credentials.authorization));
  } else if (!credentials.client_cert.empty()) {
    principal = {absl::StrCat("cert:", credentials.client_cert), Role::kWorker, "",
                 storage::kAnyNamespace};
  } else {
    return absl::UnauthenticatedError(
        "this server wants a bearer token: pass --token or set ANISOSCOPE_TOKEN (HTTP: the "
        "header 'Authorization: Bearer TOKEN')");
  }
  if (!RoleMay(principal.role, action)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "'", principal.name, "' (", RoleName(principal.role), ") may not ", ActionText(action)));
  }
  if (principal.ns.empty()) {
    principal.ns = credentials.ns.empty() ? storage::kDefaultNamespace : credentials.ns;
  } else if (!credentials.ns.empty() && credentials.ns != principal.ns) {
    if (principal.role != Role::kAdmin) {
      return absl::PermissionDeniedError(
          absl::StrCat("token '", principal.name, "' belongs to namespace '", principal.ns,
                       "' and may not act in namespace '", credentials.ns, "'"));
    }
    principal.ns = credentials.ns;
  }
  return principal;
}

absl::StatusOr<Principal> AccessControl::FromToken(const std::string& authorization) {
  ASSIGN_OR_RETURN(const std::string token, TokenFromAuthorization(authorization));
  const std::string digest = TokenSha256(token);
  ASSIGN_OR_RETURN(const std::vector<storage::TokenRecord> tokens, store_->ListTokens(true));
  // Every active hash is compared, in constant time each, whichever matches.
  const storage::TokenRecord* match = nullptr;
  for (const storage::TokenRecord& record : tokens) {
    if (DigestsEqual(digest, record.sha256)) match = &record;
  }
  if (match == nullptr) {
    return absl::UnauthenticatedError("the bearer token is not valid (unknown or revoked)");
  }
  const std::optional<Role> role = ParseRole(match->role);
  if (!role.has_value()) {
    return absl::DataLossError(absl::StrCat("token '", match->name, "' has an unknown role"));
  }
  NoteUse(match->id);
  if (match->ns == storage::kAnyNamespace && *role != Role::kWorker) {
    return absl::DataLossError(
        absl::StrCat("token '", match->name, "' is not a worker token but has namespace '*'"));
  }
  if (match->ns == storage::kAnyNamespace) {
    // A worker token of every namespace acts in the one the request names, like an admin's
    // for the worker service (the only service its role may use).
    return Principal{match->name, *role, "", storage::kAnyNamespace};
  }
  return Principal{match->name, *role, match->ns,
                   *role == Role::kAdmin ? storage::kAnyNamespace : match->ns};
}

void AccessControl::NoteUse(int64_t token_id) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    absl::Time& last = last_noted_[token_id];
    if (now - last < kUseNotedEvery) return;
    last = now;
  }
  if (absl::Status status = store_->TouchToken(token_id); !status.ok()) {
    spdlog::warn("cannot record the use of token {}: {}", token_id, std::string(status.message()));
  }
}

}  // namespace anisoscope::server
