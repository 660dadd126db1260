#include "server/host_commands.h"

#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/auth/access_control.h"
#include "server/auth/bearer_token.h"
#include "server/sources/source_allow_list.h"
#include "storage/backup.h"
#include "storage/metrics_store.h"

namespace anisoscope::server {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// "host:USER", the actor of audited changes made here.
std::string HostActor() {
  const char* user = std::getenv("USER");
  if (user == nullptr || *user == '\0') {
    const passwd* entry = getpwuid(getuid());
    user = entry != nullptr ? entry->pw_name : "unknown";
  }
  return absl::StrCat("host:", user);
}

// What the parsed command line asks for.
struct HostRequest {
  std::string db;
  std::string name;
  std::string role;
  std::string ns = storage::kDefaultNamespace;
  std::vector<std::string> roots;
  std::vector<std::string> sources;
  bool set_roots = false;    // namespaces set: --allow-root given (or neither list given)
  bool set_sources = false;  // namespaces set: --allow-source given (or neither list given)
  std::string out;
};

int Fail(std::ostream& err, const absl::Status& status) {
  err << "anisoscope-server: " << status.message() << "\n";
  return kExitFailure;
}

absl::StatusOr<std::unique_ptr<storage::MetricsStore>> OpenStore(const std::string& db) {
  storage::MetricsStore::Options options;
  options.path = db;
  return storage::MetricsStore::Open(options);
}

void Audit(storage::MetricsStore& store, const std::string& ns, const std::string& action,
           const std::string& target, const std::string& detail, std::ostream& err) {
  const absl::Status status = store.AppendAudit({0, "", HostActor(), ns, action, target, detail});
  if (!status.ok()) err << "anisoscope-server: warning: not audited: " << status.message() << "\n";
}

int CreateToken(const HostRequest& request, storage::MetricsStore& store, std::ostream& out,
                std::ostream& err) {
  const std::string token = NewBearerToken();
  storage::TokenRecord record;
  record.name = request.name;
  record.ns = request.ns;
  record.role = request.role;
  record.sha256 = TokenSha256(token);
  absl::StatusOr<storage::TokenRecord> created = store.CreateToken(record);
  if (!created.ok()) return Fail(err, created.status());
  Audit(store, request.ns, "token.create", absl::StrCat("token ", request.name),
        absl::StrCat("role ", request.role), err);
  out << token << "\n";
  err << "token '" << request.name << "' (" << request.role << ", namespace " << request.ns
      << ") created; it is shown only now and stored only as its SHA-256: hand it over and "
         "keep it secret\n";
  return kExitOk;
}

int ListTokens(const HostRequest& /*request*/, storage::MetricsStore& store, std::ostream& out,
               std::ostream& err) {
  absl::StatusOr<std::vector<storage::TokenRecord>> tokens = store.ListTokens(false);
  if (!tokens.ok()) return Fail(err, tokens.status());
  out << "NAME\tNAMESPACE\tROLE\tCREATED\tLAST USED\tREVOKED\n";
  for (const storage::TokenRecord& token : *tokens) {
    out << token.name << "\t" << token.ns << "\t" << token.role << "\t" << token.created_at << "\t"
        << (token.last_used_at.empty() ? "-" : token.last_used_at) << "\t"
        << (token.revoked_at.empty() ? "-" : token.revoked_at) << "\n";
  }
  return kExitOk;
}

int RevokeToken(const HostRequest& request, storage::MetricsStore& store, std::ostream& out,
                std::ostream& err) {
  absl::StatusOr<storage::TokenRecord> revoked = store.RevokeToken(request.name);
  if (!revoked.ok()) return Fail(err, revoked.status());
  Audit(store, revoked->ns, "token.revoke", absl::StrCat("token ", request.name),
        absl::StrCat("role ", revoked->role), err);
  out << "token '" << request.name << "' revoked\n";
  return kExitOk;
}

// Replaces the lists `request` names (both when it names neither): a namespace's sources
// narrow the server's --allow-source as its roots narrow --allow-root.
int SetNamespace(const HostRequest& request, storage::MetricsStore& store, std::ostream& out,
                 std::ostream& err) {
  if (request.set_sources) {
    // Each entry checked as the server's flag checks it, before anything is stored.
    if (absl::Status parsed = SourceAllowList::Parse(request.sources).status(); !parsed.ok()) {
      return Fail(err, parsed);
    }
  }
  if (request.set_roots) {
    if (absl::Status status = store.SetNamespaceRoots(request.ns, request.roots); !status.ok()) {
      return Fail(err, status);
    }
    const std::string roots =
        request.roots.empty() ? "the server's --allow-root" : absl::StrJoin(request.roots, ", ");
    Audit(store, request.ns, "namespace.set", absl::StrCat("namespace ", request.ns),
          absl::StrCat("roots: ", roots), err);
    out << "namespace '" << request.ns << "' reads from " << roots << "\n";
  }
  if (request.set_sources) {
    if (absl::Status status = store.SetNamespaceSources(request.ns, request.sources);
        !status.ok()) {
      return Fail(err, status);
    }
    const std::string sources = request.sources.empty() ? "the server's --allow-source"
                                                        : absl::StrJoin(request.sources, ", ");
    Audit(store, request.ns, "namespace.set", absl::StrCat("namespace ", request.ns),
          absl::StrCat("sources: ", sources), err);
    out << "namespace '" << request.ns << "' reads sources " << sources << "\n";
  }
  return kExitOk;
}

int ListNamespaces(const HostRequest& /*request*/, storage::MetricsStore& store, std::ostream& out,
                   std::ostream& err) {
  auto roots = store.ListNamespaceRoots();
  if (!roots.ok()) return Fail(err, roots.status());
  auto sources = store.ListNamespaceSources();
  if (!sources.ok()) return Fail(err, sources.status());
  std::set<std::string> names;
  for (const auto& [ns, list] : *roots) names.insert(ns);
  for (const auto& [ns, list] : *sources) names.insert(ns);
  out << "NAMESPACE\tALLOWED ROOTS\tALLOWED SOURCES\n";
  for (const std::string& ns : names) {
    const auto own_roots = roots->find(ns);
    const auto own_sources = sources->find(ns);
    out << ns << "\t" << (own_roots == roots->end() ? "-" : absl::StrJoin(own_roots->second, " "))
        << "\t" << (own_sources == sources->end() ? "-" : absl::StrJoin(own_sources->second, " "))
        << "\n";
  }
  return kExitOk;
}

int Backup(const HostRequest& request, std::ostream& out, std::ostream& err) {
  if (absl::Status status = storage::BackupDatabase(request.db, request.out); !status.ok()) {
    return Fail(err, status);
  }
  out << "backed up " << request.db << " to " << request.out << " (integrity_check ok)\n";
  return kExitOk;
}

}  // namespace

bool IsHostCommand(int argc, const char* const* argv) {
  if (argc < 2) return false;
  const std::string command = argv[1];
  return command == "tokens" || command == "namespaces" || command == "backup";
}

int RunHostCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  HostRequest request;
  CLI::App app("Commands on the anisoscope server host, against its database file.",
               "anisoscope-server");
  app.require_subcommand(1);
  const auto add_db = [&request](CLI::App* command) {
    command->add_option("--db", request.db, "the server's SQLite database file")->required();
  };

  CLI::App* tokens = app.add_subcommand("tokens", "bearer tokens: create, list, revoke");
  tokens->require_subcommand(1);
  CLI::App* create = tokens->add_subcommand(
      "create", "make a token and print it once (only its SHA-256 is stored)");
  add_db(create);
  create->add_option("--name", request.name, "who or what holds it, e.g. alice-laptop")->required();
  create
      ->add_option("--role", request.role,
                   "reader: list and query; writer: also submit and cancel; worker: only the "
                   "worker service, for the units of its --namespace; admin: everything, "
                   "every namespace")
      ->required()
      ->check(CLI::IsMember(RoleNames()));
  CLI::Option* create_ns =
      create
          ->add_option("--namespace", request.ns,
                       "the team or project it belongs to. A worker token needs it said: the "
                       "namespace whose units it may lease, or '*' for every namespace (worker "
                       "tokens made before namespaced workers keep '*')")
          ->capture_default_str();
  CLI::App* list = tokens->add_subcommand("list", "every token (never the tokens themselves)");
  add_db(list);
  CLI::App* revoke = tokens->add_subcommand("revoke", "revoke the active token of that name");
  add_db(revoke);
  revoke->add_option("--name", request.name, "the token's name")->required();

  CLI::App* namespaces = app.add_subcommand(
      "namespaces", "the directories and remote sources each namespace may read from");
  namespaces->require_subcommand(1);
  CLI::App* set = namespaces->add_subcommand(
      "set",
      "allow a namespace only these roots (inside the server's --allow-root); none: "
      "the server's roots");
  add_db(set);
  set->add_option("--namespace", request.ns, "the namespace")->required();
  CLI::Option* set_roots =
      set->add_option("--allow-root", request.roots, "a directory; repeatable")->take_all();
  CLI::Option* set_sources =
      set->add_option("--allow-source", request.sources,
                      "a remote source it may read (hub:ORG/NAME, hub:ORG/*, "
                      "s3://BUCKET/PREFIX/), allowed by the server's --allow-source too; "
                      "repeatable; none: the server's")
          ->take_all();
  CLI::App* list_namespaces =
      namespaces->add_subcommand("list", "namespaces with own roots or sources");
  add_db(list_namespaces);

  CLI::App* backup = app.add_subcommand(
      "backup", "copy the database with SQLite's online backup API (safe while serving)");
  add_db(backup);
  backup->add_option("--out", request.out, "the copy; must not exist")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error, out, err) == 0 ? kExitOk : kExitUsage;
  }
  if (backup->parsed()) return Backup(request, out, err);
  if (create->parsed() && request.role == RoleName(Role::kWorker) && create_ns->count() == 0) {
    err << "anisoscope-server: a worker token needs --namespace: the namespace whose units it "
           "may lease, or --namespace '*' for every namespace\n";
    return kExitUsage;
  }
  const bool every_namespace = create->parsed() && request.ns == storage::kAnyNamespace &&
                               request.role == RoleName(Role::kWorker);
  if ((create->parsed() && !every_namespace) || set->parsed()) {
    if (absl::Status status = ValidateNamespace(request.ns); !status.ok()) return Fail(err, status);
  }
  absl::StatusOr<std::unique_ptr<storage::MetricsStore>> store = OpenStore(request.db);
  if (!store.ok()) return Fail(err, store.status());
  if (create->parsed()) return CreateToken(request, **store, out, err);
  if (list->parsed()) return ListTokens(request, **store, out, err);
  if (revoke->parsed()) return RevokeToken(request, **store, out, err);
  if (set->parsed()) {
    // A list not given is kept, unless neither is given: then both go back to the server's.
    const bool neither = set_roots->count() == 0 && set_sources->count() == 0;
    request.set_roots = neither || set_roots->count() > 0;
    request.set_sources = neither || set_sources->count() > 0;
    return SetNamespace(request, **store, out, err);
  }
  return ListNamespaces(request, **store, out, err);
}

}  // namespace anisoscope::server
