// soak: the whole service under a team's load for a while (docs/reliability.md "Soak").
//
//   build/bin/soak [--minutes 10] [--pollers 100] [--poll-ms 1000] [--grpc-clients 20]
//                  [--grpc-pause-ms 100] [--workers 2] [--rss-every 10]
//                  [--fixture build/fixtures/bert_run]
//
// Starts the real anisoscope-server (loopback, no embedded workers) and --workers real
// anisoscope-worker processes, then for --minutes keeps a job stream going (one job at a
// time over the fixture's checkpoints with force, so every step is analysed and rewritten
// again) while --pollers HTTP pollers do what the dashboard does (a since_step poll of one
// metric, a full series every tenth time; kept-alive, gzip, If-None-Match; one every
// --poll-ms each) and --grpc-clients gRPC clients query (series, runs, jobs) with
// --grpc-pause-ms between calls. Samples the server's RSS every --rss-every seconds and
// reports jobs, errors, p50/p99 latency per protocol and the RSS slope after warm-up (the
// first fifth of the time). Exits 1 on any error or failed job.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "anisoscope/v1/anisoscope.grpc.pb.h"
#include "bench/child_process.h"
#include "bench/http_pollers.h"

namespace anisoscope::bench {
namespace {

namespace pb = ::anisoscope::v1;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "soak: %s\n", what.c_str());
  std::exit(1);
}

struct Flags {
  double minutes = 10;
  int pollers = 100;
  double poll_ms = 1000;
  int grpc_clients = 20;
  double grpc_pause_ms = 100;
  int workers = 2;
  double rss_every = 10;
  std::string fixture = BinaryBesideThisOne("../fixtures/bert_run");
};

// The flags (--help lists them), or exits.
Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  CLI::App app(
      "soak: the whole service under a team's load for a while (docs/reliability.md \"Soak\")");
  app.add_option("--minutes", flags.minutes, "how long the load runs")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6));
  app.add_option("--pollers", flags.pollers, "HTTP pollers (the dashboard's since_step pattern)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--poll-ms", flags.poll_ms, "pause between a poller's requests")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--grpc-clients", flags.grpc_clients, "gRPC clients (series, runs, jobs)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--grpc-pause-ms", flags.grpc_pause_ms, "pause between a gRPC client's calls")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--workers", flags.workers, "anisoscope-worker processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--rss-every", flags.rss_every, "seconds between samples of the server's RSS")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--fixture", flags.fixture, "the run directory the jobs analyse")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error));
  }
  return flags;
}

// Submits one job over the fixture's checkpoints and waits for its end; the error when it
// did not succeed. Adds the steps analysed and stored to `*stored`.
std::string RunOneJob(pb::JobService::Stub& jobs, const std::string& fixture,
                      std::atomic<int64_t>* stored) {
  pb::SubmitJobRequest request;
  request.set_run("soak");
  request.set_checkpoints_dir(fixture + "/bin");
  request.mutable_probe()->set_source(pb::PROBE_SOURCE_TOKENS);
  request.mutable_probe()->set_path(fixture + "/probe.jsonl");
  request.set_force(true);
  pb::Job job;
  grpc::ClientContext submit_context;
  if (grpc::Status status = jobs.SubmitJob(&submit_context, request, &job); !status.ok()) {
    return "SubmitJob: " + status.error_message();
  }
  for (int polls = 0; polls < 6000; ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grpc::ClientContext context;
    pb::GetJobRequest get;
    get.set_id(job.id());
    if (grpc::Status status = jobs.GetJob(&context, get, &job); !status.ok()) {
      return "GetJob: " + status.error_message();
    }
    if (job.state() == pb::JOB_STATE_SUCCEEDED) {
      for (const pb::CheckpointStatus& checkpoint : job.checkpoints()) {
        if (checkpoint.state() == pb::STEP_STATE_DONE) ++*stored;
      }
      return "";
    }
    if (job.state() == pb::JOB_STATE_FAILED || job.state() == pb::JOB_STATE_CANCELLED) {
      return absl::StrCat("job ", job.id(), " ended ", pb::JobState_Name(job.state()), ": ",
                          job.error());
    }
  }
  return absl::StrCat("job ", job.id(), " did not end in 10 minutes");
}

// A gRPC client: series (full and since a step), runs and jobs in turn until `end`.
LoadReport QueryUntil(const std::shared_ptr<grpc::Channel>& channel, Clock::time_point end,
                      double pause_ms, int offset) {
  auto queries = pb::QueryService::NewStub(channel);
  auto jobs = pb::JobService::NewStub(channel);
  LoadReport report;
  for (int call = offset; Clock::now() < end; ++call) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const Clock::time_point sent = Clock::now();
    grpc::Status status;
    switch (call % 4) {
      case 0:
      case 1: {
        pb::QuerySeriesRequest request;
        request.set_run("soak");
        request.set_metric(call % 4 == 0 ? "qk_mean_cosine" : "attn_entropy");
        if (call % 4 == 1) request.set_since_step(250);
        pb::QuerySeriesResponse response;
        status = queries->QuerySeries(&context, request, &response);
        break;
      }
      case 2: {
        pb::ListRunsResponse response;
        status = queries->ListRuns(&context, pb::ListRunsRequest(), &response);
        break;
      }
      default: {
        pb::ListJobsRequest request;
        request.set_run("soak");
        request.set_limit(5);
        pb::ListJobsResponse response;
        status = jobs->ListJobs(&context, request, &response);
      }
    }
    report.latency_ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    ++report.requests;
    if (!status.ok()) {
      ++report.errors;
      if (report.first_error.empty()) report.first_error = status.error_message();
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms));
  }
  return report;
}

// Least-squares slope of (minute, MiB) samples.
double SlopePerMinute(const std::vector<std::pair<double, double>>& samples) {
  if (samples.size() < 2) return 0;
  double mean_x = 0, mean_y = 0;
  for (const auto& [x, y] : samples) {
    mean_x += x;
    mean_y += y;
  }
  mean_x /= samples.size();
  mean_y /= samples.size();
  double xy = 0, xx = 0;
  for (const auto& [x, y] : samples) {
    xy += (x - mean_x) * (y - mean_y);
    xx += (x - mean_x) * (x - mean_x);
  }
  return xx > 0 ? xy / xx : 0;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  if (!std::filesystem::exists(flags.fixture + "/probe.jsonl")) {
    Die("no fixture run at " + flags.fixture +
        " (build it with ctest -R fixture_bert_run, or "
        "pass --fixture)");
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("soak_", getpid());
  std::filesystem::create_directories(dir);
  std::string grpc_address;
  std::string http_address;
  auto server = StartServer(
      BinaryBesideThisOne("anisoscope-server"),
      {"--db", (dir / "soak.db").string(), "--allow-root", flags.fixture, "--workers", "0"},
      (dir / "server.log").string(), &grpc_address, &http_address);
  if (!server.ok()) Die(server.status().ToString());
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < flags.workers; ++i) {
    const std::string name = absl::StrCat("soak-w", i);
    auto worker =
        ChildProcess::Start({BinaryBesideThisOne("anisoscope-worker"), "--server", grpc_address,
                             "--name", name, "--threads", "1", "--allow-root", flags.fixture},
                            (dir / (name + ".log")).string(), {"worker " + name + " started"});
    if (!worker.ok()) Die(worker.status().ToString());
    workers.push_back(std::move(worker).value());
  }
  const std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(grpc_address, grpc::InsecureChannelCredentials());
  auto jobs = pb::JobService::NewStub(channel);
  // The first job makes the run the pollers ask about.
  std::atomic<int64_t> steps_stored{0};
  if (std::string error = RunOneJob(*jobs, flags.fixture, &steps_stored); !error.empty()) {
    Die(error);
  }
  std::printf(
      "server %s / %s (pid %d), %d workers; %.1f min: %d HTTP pollers every %.0f ms, "
      "%d gRPC clients every %.0f ms, jobs one after another\n",
      grpc_address.c_str(), http_address.c_str(), (*server)->pid(), flags.workers, flags.minutes,
      flags.pollers, flags.poll_ms, flags.grpc_clients, flags.grpc_pause_ms);
  std::fflush(stdout);

  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(flags.minutes * 60));
  std::atomic<int> jobs_done{1};
  std::mutex mu;
  std::vector<std::string> job_errors;
  std::thread job_stream([&] {
    while (Clock::now() < end) {
      const std::string error = RunOneJob(*jobs, flags.fixture, &steps_stored);
      std::lock_guard<std::mutex> lock(mu);
      if (!error.empty()) job_errors.push_back(error);
      ++jobs_done;
    }
  });
  LoadReport http;
  std::thread pollers([&] {
    PollerOptions options;
    options.address = http_address;
    options.clients = flags.pollers;
    options.seconds = flags.minutes * 60;
    options.pause_ms = flags.poll_ms;
    std::atomic<int64_t> asked{0};
    const std::string series = "/api/v1/series?run=soak&metric=qk_mean_cosine";
    http = DrivePollers(options, [&](int64_t newest) {
      if (++asked % 10 == 0 || newest < 0) return series;
      return absl::StrCat(series, "&since_step=", newest);
    });
  });
  LoadReport grpc_report;
  std::vector<std::thread> clients;
  for (int i = 0; i < flags.grpc_clients; ++i) {
    clients.emplace_back([&, i] {
      const LoadReport mine = QueryUntil(channel, end, flags.grpc_pause_ms, i);
      std::lock_guard<std::mutex> lock(mu);
      grpc_report.Add(mine);
    });
  }

  std::vector<std::pair<double, double>> rss;  // (minutes, MiB)
  std::printf("%8s %9s %6s\n", "minute", "RSS MiB", "jobs");
  for (Clock::time_point next = start; next < end;
       next += std::chrono::duration_cast<Clock::duration>(
           std::chrono::duration<double>(flags.rss_every))) {
    std::this_thread::sleep_until(next);
    const double minute = std::chrono::duration<double>(Clock::now() - start).count() / 60;
    rss.emplace_back(minute, (*server)->RssKib() / 1024.0);
    std::printf("%8.2f %9.1f %6d\n", minute, rss.back().second, jobs_done.load());
    std::fflush(stdout);
  }
  for (std::thread& client : clients) client.join();
  pollers.join();
  job_stream.join();

  // DrivePollers sorted the HTTP latencies; the gRPC clients' are merged unsorted.
  std::sort(grpc_report.latency_ms.begin(), grpc_report.latency_ms.end());
  const auto warm = std::find_if(rss.begin(), rss.end(), [&](const auto& sample) {
    return sample.first >= flags.minutes / 5;
  });
  const std::vector<std::pair<double, double>> after_warm_up(warm, rss.end());
  std::printf(
      "jobs: %d (%zu failed), %lld steps analysed and stored again (the checkpoints of "
      "%s/bin)\n",
      jobs_done.load(), job_errors.size(), static_cast<long long>(steps_stored.load()),
      flags.fixture.c_str());
  for (const auto& [name, report] :
       {std::pair<const char*, const LoadReport&>{"HTTP", http}, {"gRPC", grpc_report}}) {
    std::printf(
        "%s: %lld requests, %lld errors, %lld 304s, p50 %.2f ms, p99 %.2f ms, max %.1f ms\n", name,
        static_cast<long long>(report.requests), static_cast<long long>(report.errors),
        static_cast<long long>(report.not_modified), report.Percentile(0.5),
        report.Percentile(0.99), report.Percentile(1.0));
    if (!report.first_error.empty()) std::printf("  first error: %s\n", report.first_error.c_str());
  }
  if (!rss.empty()) {
    std::printf(
        "server RSS: %.1f MiB at the start, %.1f at the end; after warm-up %.1f to %.1f, "
        "slope %+.2f MiB per minute\n",
        rss.front().second, rss.back().second,
        after_warm_up.empty() ? 0.0 : after_warm_up.front().second,
        after_warm_up.empty() ? 0.0 : after_warm_up.back().second, SlopePerMinute(after_warm_up));
  }
  for (const std::string& error : job_errors) std::printf("  job error: %s\n", error.c_str());
  const bool clean = http.errors == 0 && grpc_report.errors == 0 && job_errors.empty();
  workers.clear();
  server->reset();
  if (clean)
    std::filesystem::remove_all(dir);
  else
    std::printf("logs kept in %s\n", dir.c_str());
  return clean ? 0 : 1;
}

}  // namespace
}  // namespace anisoscope::bench

int main(int argc, char** argv) { return anisoscope::bench::Main(argc, argv); }
