// What every CLI command gets: its output streams, the server address, the client's
// working directory, and the helpers that connect and report errors in the one house
// format (`anisoscope: <message>` on stderr, exit 2 for usage, 1 for everything else).
// A command is a CommandSpec (flags, help) plus a function returning the exit code.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/flags.h"

namespace anisoscope::client {

// The exit codes (documented in TopLevelUsage): 2 when the request itself is wrong, whether
// the CLI or the server found out; 1 when a right request could not be carried out.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // unreachable server, refused or failed call, failed job
inline constexpr int kExitUsage = 2;    // bad command line, or INVALID_ARGUMENT / OUT_OF_RANGE
inline constexpr int kExitInterrupted = 130;  // Ctrl-C while waiting on a job (128 + SIGINT)

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

// How to reach the server and what to present to it: the global flags, else the
// environment ($ANISOSCOPE_SERVER, $ANISOSCOPE_TOKEN, $ANISOSCOPE_TLS_CA,
// $ANISOSCOPE_NAMESPACE).
struct Connection {
  std::string server;  // HOST:PORT; empty: kDefaultServer
  std::string token;   // bearer token; empty: none (a server with --auth none)
  std::string tls_ca;  // PEM file of the CA of the server's certificate; empty: plain text
  std::string ns;      // the namespace to act in (admins); empty: the token's
};

// The process around the CLI, injected so that tests can run it in-process.
struct CliEnvironment {
  std::ostream* out = nullptr;  // results
  std::ostream* err = nullptr;  // errors and progress
  bool err_is_tty = false;      // progress uses '\r' only on a TTY
  Connection from_env;          // the ANISOSCOPE_* variables; fields empty when unset
  std::string cwd;              // relative paths are made absolute against this
  // How long to wait for the server to accept a connection.
  std::chrono::milliseconds connect_timeout{5000};
  // Deadline of each unary call (streams have none).
  std::chrono::milliseconds rpc_timeout{60000};
};

class CommandContext {
 public:
  CommandContext(const CliEnvironment& env, Connection connection)
      : env_(env), connection_(std::move(connection)) {
    if (connection_.server.empty()) connection_.server = kDefaultServer;
  }

  std::ostream& out() const { return *env_.out; }
  std::ostream& err() const { return *env_.err; }
  bool err_is_tty() const { return env_.err_is_tty; }
  const std::string& server() const { return connection_.server; }
  const std::string& cwd() const { return env_.cwd; }

  // A channel that is connected (over TLS with a CA file), or
  // Unavailable("cannot reach anisoscope server at ...") after connect_timeout at most
  // (sooner when the connection is refused or the TLS handshake fails). Blocks.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect() const;
  // Sets the token and namespace metadata on `context`, and the unary-call deadline
  // unless `deadline` is false (streams).
  void Prepare(grpc::ClientContext* context, bool deadline = true) const;

  // Each writes one line `anisoscope: ...` to err() and returns the exit code.
  int UsageError(absl::string_view message) const;  // kExitUsage
  int Error(absl::string_view message) const;       // kExitFailure
  // `anisoscope: PERMISSION_DENIED: <server message>`; kExitUsage for INVALID_ARGUMENT and
  // OUT_OF_RANGE (the request is wrong), else kExitFailure.
  int RpcError(const grpc::Status& status) const;

 private:
  const CliEnvironment& env_;
  Connection connection_;
};

struct Command {
  CommandSpec spec;
  // Runs the command after its flags parsed; returns the exit code.
  std::function<int(const ParsedArgs&, const CommandContext&)> run;
};

}  // namespace anisoscope::client
