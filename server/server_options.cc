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
  --max-attempts N     leases of one checkpoint that may end without a result (expired or
                       retryable) before it fails with the last error (default 3)
  --device DEV         cpu, cuda or cuda:N (default cpu)
  --threads N          intra-op threads per worker; 0 uses every core (default 0)
  --batch-size N       probe samples per forward; 0 sizes each batch from its sequence
                       length to bound memory (default 0)
  --dtype T            float32, float16 or bfloat16 (default float32)
  --log-level L        trace, debug, info, warn or error (default info)
  --help               print this text and exit

On start it prints "listening on HOST:PORT" to stdout, then, with --http-listen,
"dashboard at http://HOST:PORT/". SIGTERM or SIGINT drains: new jobs are
refused (UNAVAILABLE), embedded workers stop and give their checkpoints back (pending for
the next start), remote workers' leases stay valid for them to finish after a restart, and
the server exits 0.
)";
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
      {"web-dir",
       [&](const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("--web-dir wants a directory");
         options.web_dir = v;
         return absl::OkStatus();
       }},
      {"db",
       [&](const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("--db wants a path");
         options.db = v;
         return absl::OkStatus();
       }},
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
      {"lease-timeout",
       [&](const std::string& v) {
         double seconds = 0;
         if (!absl::SimpleAtod(v, &seconds) || !(seconds > 0) || seconds > 86400) {
           return absl::InvalidArgumentError(absl::StrCat(
               "--lease-timeout wants seconds, more than 0 and at most 86400, got '", v, "'"));
         }
         options.lease_timeout_seconds = seconds;
         return absl::OkStatus();
       }},
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
  return options;
}

}  // namespace anisoscope::server
