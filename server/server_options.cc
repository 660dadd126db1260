#include "server/server_options.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/host_port.h"
#include "common/version.h"
#include "server/http/http_walls.h"
#include "server/sources/source_allow_list.h"
#include "worker/extractor_flags.h"
#include "worker/source_flags.h"

namespace anisoscope::server {
namespace {

constexpr char kDescription[] =
    "Serves anisoscope.v1 JobService, QueryService, WorkerService and AdminService (and\n"
    "grpc.health.v1 and server reflection) over gRPC. Checkpoints are analysed by embedded\n"
    "workers (--workers) and by anisoscope-worker processes that lease them over\n"
    "WorkerService.";

constexpr char kFooter[] = R"(
Every flag can also come from --config FILE, a TOML file of the flags' names
(db = "/srv/team.db", allow-root = ["/data"]; an unknown name is an error), or from the
environment: ANISOSCOPE_ and the flag's name in capitals with - as _, e.g.
ANISOSCOPE_HTTP_LISTEN (ANISOSCOPE_ALLOW_ROOT: directories separated by spaces). The command
line wins, then the file, then the environment.

Commands on the server host (each opens the database directly; see 'COMMAND --help'):
  anisoscope-server tokens create|list|revoke --db FILE ...
                       bearer tokens: name, namespace, role (reader, writer, worker, admin)
  anisoscope-server namespaces set|list --db FILE ...
                       the directories a namespace may read from
  anisoscope-server backup --db FILE --out FILE
                       a consistent copy, safe while the server runs

On start it prints "listening on HOST:PORT" to stdout, then, with --http-listen,
"dashboard at http://HOST:PORT/". SIGTERM or SIGINT drains: new jobs are
refused (UNAVAILABLE), embedded workers stop and give their checkpoints back (pending for
the next start), remote workers' leases stay valid for them to finish after a restart, and
the server exits 0.
)";

CLI::Validator HostPort() {
  return CLI::Validator(
      [](const std::string& value) {
        const absl::StatusOr<anisoscope::HostPort> parsed = ParseHostPort(value);
        return parsed.ok() ? std::string() : std::string(parsed.status().message());
      },
      "HOST:PORT");
}

CLI::Validator NonEmpty(const std::string& what) {
  return CLI::Validator(
      [what](const std::string& value) {
        return value.empty() ? absl::StrCat("wants ", what) : std::string();
      },
      "");
}

// Seconds, more than 0 and at most a day.
CLI::Validator Seconds() {
  return CLI::Validator(
      [](const std::string& value) {
        double seconds = 0;
        const bool ok =
            CLI::detail::lexical_cast(value, seconds) && seconds > 0 && seconds <= 86400;
        return ok ? std::string()
                  : absl::StrCat("wants seconds, more than 0 and at most 86400, got '", value, "'");
      },
      "");
}

// An integer >= `min`.
CLI::Validator IntAtLeast(int min) {
  return CLI::Validator(
      [min](const std::string& value) {
        int number = 0;
        const bool ok = CLI::detail::lexical_cast(value, number) && number >= min;
        return ok ? std::string()
                  : absl::StrCat("wants an integer >= ", min, ", got '", value, "'");
      },
      absl::StrCat("INT>=", min));
}

CLI::Validator Origin() {
  return CLI::Validator(
      [](const std::string& value) {
        const absl::StatusOr<std::string> origin = NormalizeOrigin(value);
        return origin.ok() ? std::string() : std::string(origin.status().message());
      },
      "ORIGIN");
}

// ANISOSCOPE_ and the flag's name in capitals with - as _.
std::string EnvName(const std::string& name) {
  std::string env = absl::StrCat("ANISOSCOPE_", name);
  absl::StrReplaceAll({{"-", "_"}}, &env);
  for (char& c : env) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

// Every flag of the server, onto `options` (the one list: parsing and --help both use it).
void AddFlags(CLI::App& app, ServerOptions& options) {
  app.set_config("--config", "", "TOML file of flags (see below); the command line wins")
      ->type_name("FILE");
  app.allow_config_extras(CLI::config_extras_mode::error);
  // A flag given twice: the last one wins (--allow-root: every one counts).
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  const auto add = [&app](const std::string& name, auto& field, const std::string& help) {
    return app.add_option("--" + name, field, help)->envname(EnvName(name));
  };
  app.set_version_flag("--version", ServerVersion(),
                       "print the version and the database schema version it writes, then exit");
  add("listen", options.listen, "address to serve gRPC on; port 0 picks a free port")
      ->check(HostPort());
  add("db", options.db, "SQLite database file, created when missing")->check(NonEmpty("a path"));
  add("allow-root", options.allow_roots,
      "directory checkpoints and probe files may be read from; repeatable; at least one")
      ->required()
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->delimiter(' ')
      ->check(NonEmpty("a directory"));
  add("allow-source", options.allow_sources,
      "remote series that may be read: hub:ORG/NAME, hub:ORG/* or s3://BUCKET/PREFIX/; "
      "repeatable (default: none, only folders)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check([](const std::string& entry) -> std::string {
        const absl::Status parsed = SourceAllowList::Parse({entry}).status();
        return parsed.ok() ? "" : std::string(parsed.message());
      });
  add("http-listen", options.http_listen,
      "also serve the HTTP/JSON API (/api/v1/...), /metrics and the dashboard there; port 0 "
      "picks a free port (default: off)")
      ->check(HostPort());
  add("web-dir", options.web_dir,
      "the dashboard's files, served at / by --http-listen (default: <executable's "
      "directory>/../web, i.e. build/web)")
      ->check(NonEmpty("a directory"));
  add("http-threads", options.http_threads,
      "the most HTTP request threads; each open connection holds one while it lasts, and "
      "connections beyond it wait (default 0: 32 per core, at least 128)")
      ->check(IntAtLeast(0));
  add("http-max-queued", options.http_max_queued,
      "the most HTTP connections waiting for a thread once --http-threads are busy; one more "
      "is answered 503 and closed")
      ->check(IntAtLeast(0));
  add("http-read-timeout", options.http_read_timeout_seconds,
      "seconds an HTTP client may take to send one request's line and headers, in all (not "
      "per read), and the TLS handshake; a slower one is disconnected")
      ->check(Seconds());
  add("http-write-timeout", options.http_write_timeout_seconds,
      "seconds one HTTP answer may take to be sent, in all; a client reading slower is "
      "disconnected")
      ->check(Seconds());
  add("cors-origin", options.cors_origins,
      "an origin (scheme://host[:port]) whose web pages may read the HTTP API: it gets "
      "Access-Control-Allow-Origin; repeatable (default none: the dashboard is same-origin; "
      "never '*'). With --auth none, requests from pages of other origins are refused")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->delimiter(' ')
      ->check(Origin());
  add("max-series-points", options.limits.max_series_points,
      "the most points one series query may answer (after max_points), counted before any is "
      "read, and the most it reads at once to downsample (a layer, or one series); more is "
      "RESOURCE_EXHAUSTED (HTTP 429) naming this flag")
      ->check(CLI::PositiveNumber);
  add("max-vector-values", options.limits.max_vector_values,
      "the most stored float64 values one vectors, trajectory or token cloud query (or one "
      "block of a per-block series) may read, sized before any is read (default 2^23: 64 MiB); "
      "more is RESOURCE_EXHAUSTED (HTTP 429) naming this flag")
      ->check(CLI::PositiveNumber);
  add("max-probe-tokens", options.limits.max_probe_tokens,
      "the most token ids one job's probe may hold (a token file's, counted as it is read and "
      "read no further; a text probe's samples x seq_len; samples may not pass it either); a "
      "bigger probe is refused at submit "
      "(RESOURCE_EXHAUSTED naming this flag), as is one whose units would not fit a 64 MiB "
      "gRPC message (default 128 x 2048)")
      ->check(CLI::PositiveNumber);
  add("max-watch-streams", options.limits.max_watch_streams,
      "the most WatchJob streams open at once, all callers together; more is "
      "RESOURCE_EXHAUSTED naming this flag")
      ->check(IntAtLeast(1));
  add("max-watch-streams-per-caller", options.limits.max_watch_streams_per_caller,
      "the most WatchJob streams one caller (a token, a client certificate; with --auth none, "
      "everyone) may hold open; more is RESOURCE_EXHAUSTED naming this flag. A stream whose "
      "reader falls behind gets the job's latest state instead of every event")
      ->check(IntAtLeast(1));
  add("max-watch-streams-per-namespace", options.limits.max_watch_streams_per_namespace,
      "the most WatchJob streams open in one namespace, all its callers together; more is "
      "RESOURCE_EXHAUSTED naming this flag")
      ->check(IntAtLeast(1));
  add("workers", options.workers,
      "embedded workers: anisoscope-worker processes this server starts (beside its own "
      "binary) and restarts, each under --worker-memory-max and --step-timeout, so that no "
      "checkpoint is read in the server's process; 0 leaves all work to remote workers")
      ->check(IntAtLeast(0));
  add("lease-timeout", options.lease_timeout_seconds,
      "seconds without a heartbeat after which a worker's lease expires and its checkpoint goes "
      "back to pending")
      ->check(Seconds());
  add("follow-interval", options.follow_interval_seconds,
      "seconds between two looks at the directories of jobs that follow a run being written "
      "(submit --follow, anisoscope follow)")
      ->check(Seconds());
  add("max-attempts", options.max_attempts,
      "leases of one checkpoint that may end without a result (expired or retryable) before it "
      "fails with the last error")
      ->check(IntAtLeast(1));
  add("max-leases-per-worker", options.max_leases_per_worker,
      "the most leases one worker identity (a token, a client certificate; with --auth none, "
      "every remote worker together) may hold and wait for at once; more is RESOURCE_EXHAUSTED "
      "naming this flag. Each anisoscope-worker holds up to 2 (one computing, one uploading): "
      "give each node its own token, or raise this for workers sharing one (embedded workers "
      "are not counted)")
      ->check(IntAtLeast(1));
  for (CLI::Option* option :
       worker::AddExtractorFlags(app, options.extractor, /*with_dtype=*/true)) {
    option->envname(EnvName(option->get_single_name()));
  }
  for (CLI::Option* option : worker::AddStepBoundFlags(app, options.bounds)) {
    option->envname(EnvName(option->get_single_name()));
  }
  for (CLI::Option* option : worker::AddSourceFlags(app, options.sources)) {
    option->envname(EnvName(option->get_single_name()));
  }
  add("auth", options.auth,
      "tokens: every call needs a bearer token (see 'tokens' below); none: no checks, allowed "
      "only on loopback addresses (default: tokens unless --listen and --http-listen are both "
      "loopback)")
      ->check(CLI::IsMember({"tokens", "none"}));
  add("tls-cert", options.tls_cert,
      "PEM certificate chain: serve gRPC and HTTP over TLS (with --tls-key)")
      ->check(NonEmpty("a file"));
  add("tls-key", options.tls_key, "PEM private key of --tls-cert")->check(NonEmpty("a file"));
  add("tls-client-ca", options.tls_client_ca,
      "PEM CA bundle: workers with a client certificate it signed need no token")
      ->check(NonEmpty("a file"));
  add("alarm-rules", options.alarm_rules,
      "TOML file of training-health alarm rules, checked each time a step is stored; a "
      "malformed rule stops the server naming its line; a file without rules turns alarms off "
      "(default: the built-in set, deploy/alarms/default_rules.toml; see docs/alarms.md)")
      ->check(NonEmpty("a file"));
  add("alarm-webhook", options.alarm_webhook,
      "http:// or https:// URL each alarm fired or resolved is POSTed to as JSON, from a thread "
      "of its own (never delaying a step), attempted up to 5 times with doubling backoff from "
      "0.5 s (default: none)")
      ->check(NonEmpty("a URL"));
  add("alarm-metrics-runs", options.alarm_metrics_runs,
      "runs whose firing alarms and summary gauges /metrics exports: those that stored a step "
      "most recently since the server started (bounds the label sets)")
      ->check(IntAtLeast(0));
  add("log-level", options.log_level, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.footer(kFooter);
}

}  // namespace

std::string ServerVersion() {
  return VersionLine("anisoscope-server");
}

std::string ServerUsage() {
  ServerOptions defaults;
  CLI::App app(kDescription, "anisoscope-server");
  AddFlags(app, defaults);
  return app.help();
}

absl::StatusOr<AuthMode> AuthModeFor(const ServerOptions& options) {
  std::string exposed;
  for (const std::string* address : {&options.listen, &options.http_listen}) {
    if (!address->empty() && !IsLoopback(*address)) exposed = *address;
  }
  if (options.auth == "tokens" || (options.auth.empty() && !exposed.empty())) {
    return AuthMode::kTokens;
  }
  if (!exposed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth none is allowed only when every listen address is loopback (127.0.0.1, ::1, "
        "localhost); ",
        exposed,
        " can be reached from other hosts. Create tokens (anisoscope-server tokens create) and "
        "use --auth tokens"));
  }
  return AuthMode::kNone;
}

std::string DefaultWorkerBinary() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "anisoscope-worker";
  return (exe.parent_path() / "anisoscope-worker").string();
}

std::string DefaultWebDir() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "web";
  return (exe.parent_path().parent_path() / "web").string();
}

absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv) {
  ServerOptions options;
  CLI::App app(kDescription, "anisoscope-server");
  AddFlags(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    options.help = true;
    return options;
  } catch (const CLI::CallForVersion&) {
    options.version = true;
    return options;
  } catch (const CLI::ParseError& error) {
    std::string message = absl::StrReplaceAll(error.what(), {{"\n", " "}});
    return absl::InvalidArgumentError(absl::StrCat(message, " (see --help)"));
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.tls_client_ca.empty() && options.tls_cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  return options;
}

}  // namespace anisoscope::server
