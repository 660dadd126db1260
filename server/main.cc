// anisoscope-server: serves JobService and QueryService (and, with --http-listen, the HTTP
// API and dashboard) until SIGTERM or SIGINT.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>

#include "analysis/extractor/extractor.h"
#include "common/logging.h"
#include "server/anisoscope_server.h"
#include "server/host_commands.h"
#include "server/server_options.h"

namespace {

constexpr char kProgram[] = "anisoscope-server";

}  // namespace

int main(int argc, char** argv) {
  using anisoscope::server::AnisoscopeServer;
  // Block the stop signals before any thread starts (threads inherit the mask); main
  // alone waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (anisoscope::server::IsHostCommand(argc, argv)) {
    return anisoscope::server::RunHostCommand(argc, argv, std::cout, std::cerr);
  }

  absl::StatusOr<anisoscope::server::ServerOptions> options =
      anisoscope::server::ParseServerOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    std::cout << anisoscope::server::ServerUsage();
    return 0;
  }
  if (options->version) {
    std::cout << anisoscope::server::ServerVersion() << "\n";
    return 0;
  }
  if (absl::Status status = anisoscope::SetUpLogging(options->log_level); !status.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, std::string(status.message()).c_str());
    return 2;
  }

  // The embedded workers are anisoscope-worker processes: no checkpoint is read here.
  options->worker_binary = anisoscope::server::DefaultWorkerBinary();
  const anisoscope::analysis::TorchExtractorOptions extractor_options = options->extractor;
  absl::StatusOr<std::unique_ptr<AnisoscopeServer>> server =
      AnisoscopeServer::Create(*options, [extractor_options](const std::string& dtype) {
        anisoscope::analysis::TorchExtractorOptions with_dtype = extractor_options;
        with_dtype.dtype = dtype;
        return anisoscope::analysis::CreateTorchExtractor(with_dtype);
      });
  if (!server.ok()) {
    // INVALID_ARGUMENT is a bad flag value (e.g. an --allow-root that does not exist).
    std::fprintf(stderr, "%s: cannot start: %s\n", kProgram,
                 std::string(server.status().message()).c_str());
    return server.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cout << "listening on " << (*server)->address() << std::endl;
  if (!(*server)->http_address().empty()) {
    std::cout << "dashboard at " << (options->tls_cert.empty() ? "http" : "https") << "://"
              << (*server)->http_address() << "/" << std::endl;
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("received {}; draining", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  // Within 5 s whatever the workers do: they get kStopGrace, open calls the rest.
  (*server)->Shutdown(absl::Seconds(2));
  server->reset();
  spdlog::info("bye");
  return 0;
}
