// anisoscope-worker: leases checkpoints from anisoscope-server and analyses them on this
// machine's device until SIGTERM/SIGINT, --max-units or --idle-exit.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "analysis/extractor/extractor.h"
#include "common/file_gate.h"
#include "common/logging.h"
#include "common/message_limits.h"
#include "common/tls_files.h"
#include "common/embedded_worker_key.h"
#include "sources/endpoints/source_endpoints.h"
#include "worker/remote_source.h"
#include "worker/step_bounds.h"
#include "worker/step_watchdog.h"
#include "worker/worker_loop.h"
#include "worker/worker_options.h"

namespace {

constexpr char kProgram[] = "anisoscope-worker";

int Fatal(const absl::Status& status, int code) {
  std::fprintf(stderr, "%s: %s\n", kProgram, std::string(status.message()).c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  namespace worker = anisoscope::worker;
  // Block the stop signals before any thread starts; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const worker::ParsedWorkerFlags flags = worker::ParseWorkerFlags(argc, argv);
  if (flags.exit) {
    (flags.exit_code == 0 ? std::cout : std::cerr) << flags.message;
    return flags.exit_code;
  }
  const worker::WorkerOptions& options = flags.options;
  if (absl::Status status = anisoscope::SetUpLogging(options.log_level); !status.ok()) {
    return Fatal(status, 2);
  }
  if (absl::Status capped = worker::ApplyMemoryCap(options.bounds.memory_max_bytes);
      !capped.ok()) {
    return Fatal(capped, 2);
  }
  absl::StatusOr<anisoscope::FileGate> own_files =
      anisoscope::FileGate::Beneath(options.allow_roots);
  if (!own_files.ok()) return Fatal(own_files.status(), 2);

  // The endpoints are checked now: a bad endpoint flag exits at once; credentials from the
  // environment that cannot be read fail only the remote steps, so that a worker reading
  // folders still starts. The cache folder is made at the first remote step.
  const anisoscope::sources::SourceEndpointFlags& endpoint_flags = options.sources.endpoints;
  absl::StatusOr<anisoscope::sources::SourceEndpoints> endpoints =
      anisoscope::sources::ResolveSourceEndpoints(endpoint_flags);
  std::unique_ptr<worker::RemoteSource> remote_source;
  if (endpoints.ok()) {
    worker::RemoteSource::Options remote_options;
    remote_options.endpoints = *std::move(endpoints);
    remote_options.cache_dir = worker::CacheDirOf(options.sources);
    remote_options.cache_max_bytes = options.sources.cache_max_bytes;
    remote_options.transfer.stall_timeout =
        absl::Seconds(options.sources.fetch_stall_timeout_seconds);
    absl::StatusOr<std::unique_ptr<worker::RemoteSource>> made =
        worker::RemoteSource::Create(std::move(remote_options));
    if (!made.ok()) return Fatal(made.status(), 2);
    remote_source = *std::move(made);
  } else if (!endpoint_flags.hub_endpoint.empty() || !endpoint_flags.hub_token_file.empty() ||
             !endpoint_flags.s3_endpoint.empty() || !endpoint_flags.s3_region.empty()) {
    return Fatal(endpoints.status(), 2);
  } else {
    spdlog::warn("remote steps will fail on this worker: {}",
                 std::string(endpoints.status().message()));
    remote_source = worker::RemoteSource::Unavailable(endpoints.status());
  }

  const anisoscope::analysis::TorchExtractorOptions engine = options.extractor;
  const worker::ExtractorFactory factory = [engine](const std::string& dtype) {
    anisoscope::analysis::TorchExtractorOptions with_dtype = engine;
    with_dtype.dtype = dtype;
    return anisoscope::analysis::CreateTorchExtractor(with_dtype);
  };
  // Fail fast on a device this LibTorch cannot use.
  if (auto probe = factory("float32"); !probe.ok()) return Fatal(probe.status(), 1);

  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(anisoscope::kMaxMessageBytes);
  arguments.SetMaxSendMessageSize(anisoscope::kMaxMessageBytes);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      anisoscope::ChannelCredentialsFromFiles(options.tls_ca, options.tls_cert, options.tls_key);
  if (!credentials.ok()) return Fatal(credentials.status(), 2);
  auto channel = grpc::CreateCustomChannel(options.server, *credentials, arguments);
  auto stub = anisoscope::v1::WorkerService::NewStub(channel);

  worker::WorkerLoop::Options loop_options;
  loop_options.info.set_name(options.name);
  loop_options.info.set_device(options.extractor.device);
  loop_options.max_units = options.max_units;
  loop_options.idle_exit = absl::Seconds(options.idle_exit_seconds);
  if (!options.token.empty()) {
    loop_options.metadata.emplace_back("authorization", "Bearer " + options.token);
  }
  if (!options.embedded_key.empty()) {
    loop_options.metadata.emplace_back(anisoscope::kEmbeddedWorkerKey, options.embedded_key);
  }
  loop_options.guard.bounds = options.bounds;
  loop_options.guard.abandon_process = [] { std::_Exit(worker::kStepAbandonedExitCode); };
  loop_options.remote_source = remote_source.get();
  worker::WorkerLoop loop(loop_options, stub.get(), &factory, &*own_files);

  std::atomic<bool> finished{false};  // the loop ended by itself (--max-units, --idle-exit)
  std::thread signals([&loop, &stop_signals, &finished] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    if (finished) return;
    spdlog::info("received {}; giving the lease back and exiting",
                 signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
    loop.Stop();
  });
  spdlog::info("worker {} on {} leasing from {}", options.name, options.extractor.device,
               options.server);
  std::cout << "worker " << options.name << " started" << std::endl;
  const int units = loop.Run();
  finished = true;
  pthread_kill(signals.native_handle(), SIGTERM);  // wakes the signal thread if still waiting
  signals.join();
  spdlog::info("worker {} exiting after {} unit(s)", options.name, units);
  return loop.refusal().ok() ? 0 : 1;
}
