// http_load_bench: the HTTP API under 100 concurrent pollers (docs/reliability.md "Serving under
// load").
//
//   build/bin/http_load_bench [--clients 100] [--seconds 10] [--write-every-ms 1000]
//                             [--server build/bin/anisoscope-server]
//
// Writes a 12 x 12 x 28 synthetic run (bench/synthetic_run.h) to a temporary database,
// starts the real anisoscope-server on it (loopback, no embedded workers) and, while this
// process appends a new step every --write-every-ms through its own connection (so that
// every kept answer goes stale and pollers see new data), drives the API with --clients
// concurrent pollers asking again as soon as answered, in turn:
//   since_step poll    the dashboard's poll: one metric's steps after the newest it has
//   full series        one metric, every layer and head of the first 28 steps (260 KB)
// each as browsers poll (kept-alive connection, gzip, If-None-Match), as dashboards opening
// for the first time ask (no If-None-Match) and plain (a new connection per request, no
// gzip, no ETag: what wrk measured in issue 15). Prints requests, errors, 304s,
// requests/s, p50/p99/max latency and the server's RSS; exits 1 on any error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/child_process.h"
#include "bench/http_pollers.h"
#include "bench/synthetic_run.h"
#include "storage/metrics_store.h"

namespace anisoscope::bench {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "http_load_bench: %s\n", what.c_str());
  std::exit(1);
}

// Appends a step every `every_ms` until stopped.
class StepWriter {
 public:
  StepWriter(storage::MetricsStore* store, int first_index, int every_ms)
      : thread_([=] {
          for (int index = first_index; !stop_; ++index) {
            for (int waited = 0; waited < every_ms && !stop_; waited += 10) {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (stop_) break;
            if (absl::Status status = WriteSyntheticStep(*store, index); !status.ok()) {
              Die(status.ToString());
            }
            ++written_;
          }
        }) {}
  ~StepWriter() {
    stop_ = true;
    thread_.join();
  }
  int written() const { return written_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> written_{0};
  std::thread thread_;
};

int Main(int argc, char** argv) {
  PollerOptions options;
  int write_every_ms = 1000;
  std::string server_binary = BinaryBesideThisOne("anisoscope-server");
  CLI::App app(
      "http_load_bench: the HTTP API under concurrent pollers (docs/reliability.md \"Serving under "
      "load\")");
  app.add_option("--clients", options.clients, "concurrent pollers")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", options.seconds, "how long each pattern runs")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 1e6));
  app.add_option("--write-every-ms", write_every_ms, "a new step is written this often")
      ->capture_default_str()
      ->check(CLI::Range(10, 1000000));
  app.add_option("--server", server_binary, "the anisoscope-server binary")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("http_load_bench_", getpid());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "bench.db").string();
  auto store = storage::MetricsStore::Open({db});
  if (!store.ok()) Die(store.status().ToString());
  for (int index = 0; index < kSyntheticSteps; ++index) {
    if (absl::Status status = WriteSyntheticStep(**store, index); !status.ok()) {
      Die(status.ToString());
    }
  }
  std::string grpc_address;
  auto server =
      StartServer(server_binary, {"--db", db, "--allow-root", dir.string(), "--workers", "0"},
                  (dir / "server.log").string(), &grpc_address, &options.address);
  if (!server.ok()) Die(server.status().ToString());
  std::printf(
      "server %s (pid %d), %d pollers, %.0f s each, a new step every %d ms; "
      "machine: %u cores\n",
      options.address.c_str(), (*server)->pid(), options.clients, options.seconds, write_every_ms,
      std::thread::hardware_concurrency());
  std::printf("%-34s %8s %6s %6s %8s %8s %8s %8s %9s\n", "pattern", "requests", "errors", "304s",
              "req/s", "p50 ms", "p99 ms", "max ms", "RSS MiB");
  std::fflush(stdout);

  const std::string series =
      absl::StrCat("/api/v1/series?run=", kSyntheticRun, "&metric=qk_mean_cosine");
  const PathFor poll = [&](int64_t newest) {
    return absl::StrCat(series,
                        "&since_step=", newest >= 0 ? newest : SyntheticStep(kSyntheticSteps - 1));
  };
  const PathFor full = [&](int64_t) {
    return absl::StrCat(series, "&to_step=", SyntheticStep(kSyntheticSteps - 1));
  };
  int next_index = kSyntheticSteps;
  int64_t errors = 0;
  struct Pattern {
    const char* name;
    const PathFor& path_for;
    ClientKind kind;
  };
  for (const Pattern& pattern :
       {Pattern{"since_step poll, browser", poll, ClientKind::kBrowser},
        Pattern{"since_step poll, first visit", poll, ClientKind::kFirstVisit},
        Pattern{"since_step poll, plain", poll, ClientKind::kPlain},
        Pattern{"full series, browser", full, ClientKind::kBrowser},
        Pattern{"full series, first visit", full, ClientKind::kFirstVisit},
        Pattern{"full series, plain", full, ClientKind::kPlain}}) {
    options.kind = pattern.kind;
    options.read_steps = &pattern.path_for == &poll;  // full series: the bodies are only counted
    LoadReport report;
    {
      StepWriter writer(store->get(), next_index, write_every_ms);
      report = DrivePollers(options, pattern.path_for);
      next_index += writer.written() + 1;
    }
    errors += report.errors;
    std::printf("%-34s %8lld %6lld %6lld %8.0f %8.2f %8.2f %8.1f %9.1f\n", pattern.name,
                static_cast<long long>(report.requests), static_cast<long long>(report.errors),
                static_cast<long long>(report.not_modified), report.RequestsPerSecond(),
                report.Percentile(0.5), report.Percentile(0.99), report.Percentile(1.0),
                (*server)->RssKib() / 1024.0);
    if (!report.first_error.empty()) std::printf("  first error: %s\n", report.first_error.c_str());
    std::fflush(stdout);
  }
  server->reset();
  store->reset();
  std::filesystem::remove_all(dir);
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace anisoscope::bench

int main(int argc, char** argv) { return anisoscope::bench::Main(argc, argv); }
