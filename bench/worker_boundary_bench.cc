// worker_boundary_bench: what the process boundary costs a step (issue 37). The same
// series through the real server, once with its embedded worker as a thread of the server's
// process (the way before) and once as an anisoscope-worker process over a socketpair (the
// server's way now), in alternating order: the job's wall time from submit to its end, and
// from its first step's end (the steps after a worker's first: the steady state).
//
//   build/bin/worker_boundary_bench --checkpoints RUN_DIR --probe PROBE.jsonl [--repeats 3]
//
// RUN_DIR holds step_N folders (e.g. links to one bench/make_bench_checkpoint.py BERT-base
// checkpoint); PROBE is a token probe. Prints each run, then the best of each way and their
// ratios (goal: processes <= 1.02 x threads). The thread runs share this process, warm from
// the runs before; each process run starts a fresh worker.
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
};

// The times of every step of `run_dir` analysed by one embedded worker: a process when
// `processes`, else a thread of this process.
SeriesTime RunSeries(const fs::path& run_dir, const fs::path& probe, bool processes, int repeat) {
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
  request.mutable_probe()->set_samples(16);  // the whole probe of make_bench_checkpoint.py
  const absl::StatusOr<WatchedJob> watched = SubmitAndWatch(jobs.get(), request);
  if (!watched.ok()) Die(std::string(watched.status().message()));
  const pb::Job& job = watched->job;
  const SeriesTime seconds = {watched->seconds, watched->seconds - watched->first_step_seconds};
  if (job.state() != pb::JOB_STATE_SUCCEEDED) Die("the bench job did not succeed");
  (*server)->Shutdown(absl::Seconds(2));
  server->reset();
  fs::remove_all(dir);
  return seconds;
}

}  // namespace
}  // namespace anisoscope

int main(int argc, char** argv) {
  std::string checkpoints, probe;
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
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const std::filesystem::path run_dir = std::filesystem::absolute(checkpoints);
  const std::filesystem::path probe_file = std::filesystem::absolute(probe);
  std::vector<anisoscope::SeriesTime> threads, processes;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    for (const bool as_process : {repeat % 2 == 1, repeat % 2 == 0}) {
      const anisoscope::SeriesTime time =
          anisoscope::RunSeries(run_dir, probe_file, as_process, repeat);
      (as_process ? processes : threads).push_back(time);
      std::printf("repeat %d, worker %-7s whole %.3f s, after the first step %.3f s\n",
                  repeat + 1, as_process ? "process" : "thread", time.whole, time.steady);
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
