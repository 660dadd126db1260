// lease_bench: the hidden costs of leasing work to workers.
//
//   build/bin/lease_bench [--units N (default 300)] [--seconds-per-unit S... (default 0.5 0.2)]
//
// Starts the real server in process (SQLite in a temp dir, --workers 0) and runs worker
// loops (worker/worker_loop.h, the code anisoscope-worker runs) on threads, each over its
// own TCP channel to 127.0.0.1, with an engine stand-in that returns BERT-base-shaped
// metrics (12 x 12 heads, head_dim 64) over 6 batches:
//   1. overhead per unit with an instant engine and one worker: lease, the probe's
//      heartbeat, one heartbeat per batch, the upload's check and its SQLite write;
//   2. throughput with 1, 2, 4 and 8 workers and an engine that takes a fixed time per
//      checkpoint, as a fraction of the ideal N / time (goal >= 0.9).
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "bench/watched_job.h"
#include "common/message_limits.h"
#include "server/anisoscope_server.h"
#include "worker/worker_loop.h"

namespace anisoscope {
namespace {

namespace fs = std::filesystem;
namespace pb = ::anisoscope::v1;

constexpr int kBatches = 6;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "lease_bench: %s\n", what.c_str());
  std::exit(1);
}

// Takes `seconds` per checkpoint (0: instant), in kBatches batches, and returns fixed
// BERT-base-shaped metrics.
class TimedExtractor : public analysis::Extractor {
 public:
  explicit TimedExtractor(double seconds) : seconds_(seconds) {}

  absl::StatusOr<analysis::Probe> BuildProbe(const fs::path&, const analysis::ProbeSpec& spec,
                                             const FileGate&) override {
    analysis::Probe probe;
    probe.samples = spec.token_ids;
    probe.id = analysis::ComputeProbeId(probe.samples);
    probe.description = "bench";
    return probe;
  }

  absl::StatusOr<analysis::CheckpointMetrics> Extract(const fs::path&, const analysis::Probe& probe,
                                                      const analysis::ExtractCallbacks& callbacks,
                                                      const FileGate&) override {
    for (int batch = 1; batch <= kBatches; ++batch) {
      if (seconds_ > 0) absl::SleepFor(absl::Seconds(seconds_ / kBatches));
      if (callbacks.progress) callbacks.progress(batch, kBatches);
    }
    analysis::CheckpointMetrics metrics;
    metrics.shape.family = "bert";
    metrics.shape.num_layers = 12;
    metrics.shape.num_heads = 12;
    metrics.shape.head_dim = 64;
    metrics.shape.hidden_size = 768;
    metrics.num_samples = static_cast<int64_t>(probe.samples.size());
    metrics.num_tokens = probe.num_tokens();
    for (int layer = 0; layer < 12; ++layer) {
      for (int head = 0; head < 12; ++head) {
        analysis::HeadMetrics& m = metrics.heads.emplace_back();
        m.layer = layer;
        m.head = head;
        m.qk_mean_cosine = 0.01 * (layer + head);
        m.q_mean.assign(64, 0.5);
        m.k_mean.assign(64, -0.5);
      }
    }
    for (int i = 0; i <= 12; ++i) {
      analysis::HiddenStateMetrics& m = metrics.hidden_states.emplace_back();
      m.index = i;
      m.anisotropy = 0.3;
      m.mean_norm = 10.0;
      // The second wave's spectrum: min(tokens, hidden size) singular values, as the engine.
      m.spectrum.assign(std::min<size_t>(probe.num_tokens(), 768), 1.0 / (i + 1));
    }
    metrics.final_norm_gain.assign(768, 1.0);
    return metrics;
  }

 private:
  const double seconds_;
};

struct Result {
  double seconds = 0;
  int units = 0;
};

// Runs `units` checkpoints through `workers` worker loops, each `seconds` long.
Result Run(const fs::path& dir, int workers, int units, double seconds) {
  fs::remove_all(dir);
  fs::create_directories(dir / "run");
  std::ofstream(dir / "probe.jsonl") << "[101, 7, 8, 102]\n[101, 9, 102]\n";
  pb::SubmitJobRequest request;
  request.set_run("bench");
  request.mutable_probe()->set_source(pb::PROBE_SOURCE_TOKENS);
  request.mutable_probe()->set_path((dir / "probe.jsonl").string());
  for (int step = 1; step <= units; ++step) {
    const fs::path checkpoint = dir / "run" / ("step_" + std::to_string(step));
    fs::create_directories(checkpoint);
    pb::CheckpointRef* ref = request.add_checkpoints();
    ref->set_step(step);
    ref->set_path(checkpoint.string());
  }
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db = (dir / "bench.db").string();
  options.allow_roots = {dir.string()};
  options.workers = 0;
  auto server = server::AnisoscopeServer::Create(
      options, [](const std::string&) -> absl::StatusOr<std::unique_ptr<analysis::Extractor>> {
        return nullptr;  // no embedded workers
      });
  if (!server.ok()) Die(std::string(server.status().message()));
  auto files = FileGate::Beneath({dir.string()});
  if (!files.ok()) Die(std::string(files.status().message()));
  const worker::ExtractorFactory factory =
      [seconds](const std::string&) -> absl::StatusOr<std::unique_ptr<analysis::Extractor>> {
    return std::make_unique<TimedExtractor>(seconds);
  };

  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto jobs = pb::JobService::NewStub(channel);
  std::vector<std::unique_ptr<pb::WorkerService::Stub>> stubs;
  std::vector<std::unique_ptr<worker::WorkerLoop>> loops;
  for (int i = 0; i < workers; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetInt("bench.worker", i);  // a channel (and TCP connection) per worker
    arguments.SetMaxSendMessageSize(kMaxMessageBytes);
    stubs.push_back(pb::WorkerService::NewStub(grpc::CreateCustomChannel(
        (*server)->address(), grpc::InsecureChannelCredentials(), arguments)));
    worker::WorkerLoop::Options loop_options;
    loop_options.info.set_name("bench-" + std::to_string(i));
    loop_options.info.set_device("cpu");
    loop_options.lease_wait = absl::Seconds(2);
    loops.push_back(
        std::make_unique<worker::WorkerLoop>(loop_options, stubs.back().get(), &factory, &*files));
  }
  std::vector<std::thread> threads;
  for (auto& loop : loops) threads.emplace_back([&loop] { loop->Run(); });
  absl::SleepFor(absl::Milliseconds(200));  // every worker is long-polling

  const absl::StatusOr<WatchedJob> watched = SubmitAndWatch(jobs.get(), request);
  if (!watched.ok()) Die(std::string(watched.status().message()));
  const pb::Job& job = watched->job;
  const double elapsed = watched->seconds;
  if (job.state() != pb::JOB_STATE_SUCCEEDED) Die("the bench job did not succeed");
  for (auto& loop : loops) loop->Stop();
  for (std::thread& thread : threads) thread.join();
  (*server)->Shutdown(absl::Seconds(2));
  return {elapsed, units};
}

}  // namespace
}  // namespace anisoscope

int main(int argc, char** argv) {
  int units = 300;
  std::vector<double> fixed_times = {0.5, 0.2};
  CLI::App app("lease_bench: the hidden costs of leasing work to workers");
  app.add_option("--units", units, "units of the instant-engine job")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seconds-per-unit", fixed_times,
                 "the fixed engine's seconds per checkpoint, one throughput table each")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1000.0));
  CLI11_PARSE(app, argc, argv);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lease_bench_" + std::to_string(getpid()));
  spdlog::set_level(spdlog::level::warn);

  const anisoscope::Result instant = anisoscope::Run(dir, 1, units, 0);
  std::printf("overhead per unit, instant engine, 1 worker: %.2f ms (%d units in %.2f s)\n",
              1000 * instant.seconds / instant.units, instant.units, instant.seconds);
  for (double seconds : fixed_times) {
    std::printf("throughput, %.2f s per checkpoint:\n", seconds);
    std::printf("  workers  units  seconds  units/s  ideal  fraction of ideal\n");
    for (int workers : {1, 2, 4, 8}) {
      const int n = workers * 8;
      const anisoscope::Result r = anisoscope::Run(dir, workers, n, seconds);
      const double rate = r.units / r.seconds;
      const double ideal = workers / seconds;
      std::printf("  %7d  %5d  %7.2f  %7.2f  %5.2f  %.3f\n", workers, r.units, r.seconds, rate,
                  ideal, rate / ideal);
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}
