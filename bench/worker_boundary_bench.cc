// worker_boundary_bench: what the process boundary costs a step (issue 37). The same
// series through the real server, once with its embedded worker as a thread of the server's
// process (the way before) and once as an anisoscope-worker process over a Unix socket (the
// server's way now), in alternating order: the job's wall time from submit to its end, and
// from its first step's end (the steps after a worker's first: the steady state), and the
// CPU time of the run with the kernel's share of it (page faults, zeroing of fresh pages).
//
//   build/bin/worker_boundary_bench --checkpoints RUN_DIR --probe PROBE.jsonl [--repeats 3]
//       [--samples 16] [--metrics all]
//
// RUN_DIR holds step_N folders (e.g. links to one bench/make_bench_checkpoint.py BERT-base
// checkpoint); PROBE is a token probe of at least --samples lines. Prints each run, then the
// best of each way and their ratios (goal: processes <= 1.02 x threads). The thread runs
// share this process, warm from the runs before; each process run starts a fresh worker.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "analysis/extractor/extractor.h"
#include "bench/cpu_usage.h"
#include "bench/watched_job.h"
#include "server/anisoscope_server.h"
#include "server/server_options.h"

namespace anisoscope {
namespace {

namespace fs = std::filesystem;
namespace pb = ::anisoscope::v1;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "worker_boundary_bench: %s\n", what.c_str());
  std::exit(1);
}

struct SeriesTime {
  double whole = 0;   // submit to the job's end
  double steady = 0;  // the first step's end to the job's end: the steps after the first
  // The CPU of the run: this process (the server, and a thread worker) and its reaped
  // children (a process worker, reaped when the server stops).
  CpuUsage cpu;
};

// The times of every step of `run_dir` analysed by one embedded worker: a process when
// `processes`, else a thread of this process.
struct SeriesJob {
  fs::path run_dir;
  fs::path probe;
  int samples = 16;  // the whole probe of make_bench_checkpoint.py
  std::string metrics = "all";
};

SeriesTime RunSeries(const SeriesJob& series, bool processes, int repeat) {
  const fs::path& run_dir = series.run_dir;
  const fs::path& probe = series.probe;
  const CpuUsage cpu_before = CpuUsage::Now() + CpuUsage::Now(RUSAGE_CHILDREN);
  const fs::path dir = fs::temp_directory_path() /
                       ("worker_boundary_bench_" + std::to_string(getpid()) + "_" +
                        std::to_string(repeat) + (processes ? "p" : "t"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db = (dir / "bench.db").string();
  options.allow_roots = {run_dir.string(), probe.parent_path().string()};
  options.workers = 1;
  options.worker_binary = processes ? server::DefaultWorkerBinary() : "";
  auto server = server::AnisoscopeServer::Create(options, [](const std::string& dtype) {
    analysis::TorchExtractorOptions extractor;
    extractor.dtype = dtype;
    return analysis::CreateTorchExtractor(extractor);
  });
  if (!server.ok()) Die(std::string(server.status().message()));
  auto jobs = pb::JobService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  pb::SubmitJobRequest request;
  request.set_run("bench");
  request.set_checkpoints_dir(run_dir.string());
  request.mutable_probe()->set_source(pb::PROBE_SOURCE_TOKENS);
  request.mutable_probe()->set_path(probe.string());
  request.mutable_probe()->set_samples(series.samples);
  request.mutable_probe()->set_metrics(series.metrics);
  const absl::StatusOr<WatchedJob> watched = SubmitAndWatch(jobs.get(), request);
  if (!watched.ok()) Die(std::string(watched.status().message()));
  const pb::Job& job = watched->job;
  SeriesTime seconds = {watched->seconds, watched->seconds - watched->first_step_seconds};
  if (job.state() != pb::JOB_STATE_SUCCEEDED) Die("the bench job did not succeed");
  (*server)->Shutdown(absl::Seconds(2));
  server->reset();
  seconds.cpu = CpuUsage::Now() + CpuUsage::Now(RUSAGE_CHILDREN) - cpu_before;
  fs::remove_all(dir);
  return seconds;
}

}  // namespace
}  // namespace anisoscope

int main(int argc, char** argv) {
  std::string checkpoints, probe;
  anisoscope::SeriesJob series;
  int repeats = 3;
  CLI::App app("worker_boundary_bench: a series through a worker thread and a worker process");
  app.add_option("--checkpoints", checkpoints, "a run folder of step_N checkpoints")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--probe", probe, "a token probe (JSON lines of ids)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--repeats", repeats, "pairs of runs, the order alternating")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--samples", series.samples, "the probe's samples per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--metrics", series.metrics, "the metric groups of the job (core, all, ...)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  series.run_dir = std::filesystem::absolute(checkpoints);
  series.probe = std::filesystem::absolute(probe);
  std::vector<anisoscope::SeriesTime> threads, processes;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    for (const bool as_process : {repeat % 2 == 1, repeat % 2 == 0}) {
      const anisoscope::SeriesTime time = anisoscope::RunSeries(series, as_process, repeat);
      (as_process ? processes : threads).push_back(time);
      std::printf(
          "repeat %d, worker %-7s whole %.3f s, after the first step %.3f s; CPU %.1f s, the "
          "kernel's %.1f %% (%ld page faults)\n",
          repeat + 1, as_process ? "process" : "thread", time.whole, time.steady,
          time.cpu.user + time.cpu.kernel, 100 * time.cpu.kernel_share(), time.cpu.page_faults);
      std::fflush(stdout);
    }
  }
  const auto best = [](const std::vector<anisoscope::SeriesTime>& times, auto field) {
    double least = times.front().*field;
    for (const anisoscope::SeriesTime& time : times) least = std::min(least, time.*field);
    return least;
  };
  for (const auto& [what, field] :
       {std::pair{"whole series", &anisoscope::SeriesTime::whole},
        std::pair{"after the first step", &anisoscope::SeriesTime::steady}}) {
    const double t = best(threads, field);
    const double p = best(processes, field);
    std::printf("best, %s: thread %.3f s, process %.3f s; process / thread = %.3f\n", what, t,
                p, p / t);
  }
  return 0;
}
