#include "server/server_options.h"

#include <filesystem>
#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/device_name.h"

namespace anisoscope::server {
namespace {

// Sets `*out` from a `--flag HOST:PORT` value (the port itself is checked when binding).
std::function<absl::Status(const std::string&)> HostPortSetter(const std::string& flag,
                                                               std::string* out) {
  return [flag, out](const std::string& v) {
    if (v.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " wants HOST:PORT, got '", v, "'"));
    }
    *out = v;
    return absl::OkStatus();
  };
}

// Sets `*out` from a `--flag VALUE` value that may not be empty; `what` names it in the
// error ("a file", "a path").
std::function<absl::Status(const std::string&)> NonEmptySetter(const std::string& flag,
                                                               const std::string& what,
                                                               std::string* out) {
  return [flag, what, out](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " wants ", what));
    *out = v;
    return absl::OkStatus();
  };
}

absl::Status ParseInt(const std::string& flag, const std::string& value, int min, int* out) {
  int parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " wants an integer >= ", min, ", got '", value, "'"));
  }
  *out = parsed;
  return absl::OkStatus();
}

absl::Status ParseChoice(const std::string& flag, const std::string& value,
                         const std::vector<std::string>& choices, std::string* out) {
  for (const std::string& choice : choices) {
    if (value == choice) {
      *out = value;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " got '", value, "'; want one of ", absl::StrJoin(choices, ", ")));
}

// A flag of seconds, more than 0 and at most a day.
std::function<absl::Status(const std::string&)> SecondsSetter(const std::string& flag,
                                                              double* out) {
  return [flag, out](const std::string& v) {
    double seconds = 0;
    if (!absl::SimpleAtod(v, &seconds) || !(seconds > 0) || seconds > 86400) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " wants seconds, more than 0 and at most 86400, got '", v, "'"));
    }
    *out = seconds;
    return absl::OkStatus();
  };
}

}  // namespace

std::string ServerUsage() {
  return R"(usage: anisoscope-server --allow-root DIR [flags]

Serves anisoscope.v1 JobService, QueryService and WorkerService (and grpc.health.v1)
over gRPC. Checkpoints are analysed by embedded workers (--workers) and by
anisoscope-worker processes that lease them over WorkerService.

flags:
  --listen HOST:PORT   address to serve on; port 0 picks a free port (default 127.0.0.1:50051)
  --db PATH            SQLite database file, created when missing (default ./anisoscope.db)
  --allow-root DIR     directory checkpoints and probe files may be read from; repeatable;
                       at least one is required
  --http-listen HOST:PORT
                       also serve the HTTP/JSON API (/api/v1/...) and the dashboard there;
                       port 0 picks a free port (default: off)
  --web-dir DIR        the dashboard's files, served at / by --http-listen
                       (default: <executable's directory>/../web, i.e. build/web)
  --workers N          embedded worker threads, one extractor each; 0 leaves all work to
                       remote anisoscope-worker processes (default 1)
  --lease-timeout S    seconds without a heartbeat after which a worker's lease expires and
                       its checkpoint goes back to pending (default 60)
  --follow-interval S  how often the directories of jobs that follow a run being written
                       (submit --follow, anisoscope follow) are listed for new whole
                       checkpoints (default 2)
  --max-attempts N     leases of one checkpoint that may end without a result (expired or
                       retryable) before it fails with the last error (default 3)
  --device DEV         cpu, cuda or cuda:N (default cpu)
  --threads N          intra-op threads per worker; 0 uses every core (default 0)
  --batch-size N       probe samples per forward; 0 sizes each batch from its sequence
                       length to bound memory (default 0)
  --dtype T            float32, float16 or bfloat16 (default float32)
  --auth MODE          tokens: every call needs a bearer token (see 'tokens' below); none:
                       no checks, allowed only on loopback addresses (default: tokens unless
                       --listen and --http-listen are both loopback)
  --tls-cert FILE      PEM certificate chain: serve gRPC and HTTP over TLS (with --tls-key)
  --tls-key FILE       PEM private key of --tls-cert
  --tls-client-ca FILE PEM CA bundle: workers with a client certificate it signed need no
                       token
  --log-level L        trace, debug, info, warn or error (default info)
  --help               print this text and exit

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
}

bool IsLoopback(const std::string& host_port) {
  std::string host = host_port.substr(0, host_port.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
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

std::string DefaultWebDir() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "web";
  return (exe.parent_path().parent_path() / "web").string();
}

absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv) {
  ServerOptions options;
  using Setter = std::function<absl::Status(const std::string&)>;
  const std::map<std::string, Setter> setters = {
      {"listen", HostPortSetter("listen", &options.listen)},
      {"http-listen", HostPortSetter("http-listen", &options.http_listen)},
      {"web-dir", NonEmptySetter("web-dir", "a directory", &options.web_dir)},
      {"db", NonEmptySetter("db", "a path", &options.db)},
      {"allow-root",
       [&](const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("--allow-root wants a directory");
         options.allow_roots.push_back(v);
         return absl::OkStatus();
       }},
      {"workers",
       [&](const std::string& v) { return ParseInt("workers", v, 0, &options.workers); }},
      {"max-attempts",
       [&](const std::string& v) { return ParseInt("max-attempts", v, 1, &options.max_attempts); }},
      {"lease-timeout", SecondsSetter("lease-timeout", &options.lease_timeout_seconds)},
      {"follow-interval", SecondsSetter("follow-interval", &options.follow_interval_seconds)},
      {"device",
       [&](const std::string& v) {
         if (!IsDeviceName(v)) {
           return absl::InvalidArgumentError(
               absl::StrCat("--device got '", v, "'; want cpu, cuda or cuda:N"));
         }
         options.extractor.device = v;
         return absl::OkStatus();
       }},
      {"threads",
       [&](const std::string& v) {
         return ParseInt("threads", v, 0, &options.extractor.num_threads);
       }},
      {"batch-size",
       [&](const std::string& v) {
         return ParseInt("batch-size", v, 0, &options.extractor.batch_size);
       }},
      {"dtype",
       [&](const std::string& v) {
         return ParseChoice("dtype", v, {"float32", "float16", "bfloat16"},
                            &options.extractor.dtype);
       }},
      {"auth",
       [&](const std::string& v) {
         return ParseChoice("auth", v, {"tokens", "none"}, &options.auth);
       }},
      {"tls-cert", NonEmptySetter("tls-cert", "a file", &options.tls_cert)},
      {"tls-key", NonEmptySetter("tls-key", "a file", &options.tls_key)},
      {"tls-client-ca", NonEmptySetter("tls-client-ca", "a file", &options.tls_client_ca)},
      {"log-level",
       [&](const std::string& v) {
         return ParseChoice("log-level", v, {"trace", "debug", "info", "warn", "error"},
                            &options.log_level);
       }},
  };

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = setters.find(name);
    if (it == setters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '--", name, "' (see --help)"));
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " wants a value"));
      }
      value = argv[++i];
    }
    if (absl::Status status = it->second(value); !status.ok()) return status;
  }
  if (options.allow_roots.empty()) {
    return absl::InvalidArgumentError("at least one --allow-root DIR is required");
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
