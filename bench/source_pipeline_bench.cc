// source_pipeline_bench: a series analysed from a Hub-speaking server through the bounded
// cache, the next step downloading while this one computes (issue 38, items 3 and 4). The
// server is tests/sources/servers/hub_server.py over ROOT (ROOT/ORG/NAME/<branch>/, a step
// per branch), throttled; each step is listed, fetched by the prefetch pipeline, extracted
// by the engine (CPU) and unpinned, as a worker does. Prints, per step and in all, the
// download and compute seconds, the wall time against max(sum download, sum compute) plus
// one step (the goal: at most 1.15 x), and the cache's largest size on disk, sampled every
// 20 ms, against its bound plus one file. With --second-pass, the series again: the steps
// still cached cost no network byte.
//
//   build/bin/source_pipeline_bench --root ROOT --repo ORG/NAME --probe PROBE.jsonl
//       [--throttle 200e6] [--cache-max-bytes SIZE] [--depth 1] [--metrics core]
//       [--steps GLOB] [--second-pass]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "analysis/extractor/extractor.h"
#include "analysis/metric_catalog/metric_groups.h"
#include "bench/child_process.h"
#include "common/file_gate.h"
#include "sources/cache/source_cache.h"
#include "sources/fetch/fetch_plan.h"
#include "sources/fetch/step_fetcher.h"
#include "sources/fetch/step_prefetcher.h"
#include "sources/listing/hub_listing.h"
#include "sources/transfer/http_client.h"

namespace anisoscope {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string root, repo, probe;
  double throttle = 200e6;  // bytes per second the server sends at most
  uint64_t cache_max_bytes = uint64_t{4} << 30;
  int depth = 1;
  std::string metrics = "core";
  std::string steps;  // a glob over the branches; empty: every one
  bool second_pass = false;
};

// The Hub server, stopped by Die too (std::exit runs no local destructor).
std::unique_ptr<bench::ChildProcess> hub_server;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "source_pipeline_bench: %s\n", what.c_str());
  hub_server.reset();
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) Die(std::string(value.status().message()));
  return *std::move(value);
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The bytes under `dir` (blobs and downloads in progress), its largest seen while it lives.
class DiskPeak {
 public:
  explicit DiskPeak(fs::path dir)
      : dir_(std::move(dir)), sampler_([this] {
          while (!done_) {
            peak_ = std::max<uint64_t>(peak_, Bytes());
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~DiskPeak() {
    done_ = true;
    sampler_.join();
  }
  uint64_t peak() const { return peak_; }

 private:
  uint64_t Bytes() const {
    uint64_t bytes = 0;
    std::error_code error;
    for (fs::recursive_directory_iterator it(dir_, error), end; !error && it != end;
         it.increment(error)) {
      if (it->is_regular_file(error) && !it->is_symlink(error)) bytes += it->file_size(error);
    }
    return bytes;
  }
  const fs::path dir_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> peak_{0};
  std::thread sampler_;
};

struct PassFigures {
  double wall = 0, download = 0, compute = 0;
  int64_t bytes_fetched = 0;
  int cache_hits = 0;
};

// A token probe checked against the model of the first step that arrives (its config.json).
struct LazyProbe {
  analysis::ProbeSpec spec;
  std::optional<analysis::Probe> probe;
  const analysis::Probe& For(analysis::Extractor& extractor, const fs::path& checkpoint) {
    if (!probe) probe = OrDie(extractor.BuildProbe(checkpoint, spec, FileGate::Host()));
    return *probe;
  }
};

// Every step once, in order: step i+1 prefetched while step i computes.
PassFigures RunPass(const std::vector<fetch::FetchStep>& steps, const fetch::StepFetcher& fetcher,
                    analysis::Extractor& extractor, LazyProbe& probe, int depth) {
  fetch::StepPrefetcher prefetcher(&fetcher, {depth});
  PassFigures figures;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t next = i + 1; next <= std::min(steps.size() - 1, i + depth); ++next) {
      if (absl::Status started = prefetcher.Start(steps[next]); !started.ok()) {
        Die(std::string(started.message()));
      }
    }
    const fetch::FetchedStep fetched = OrDie(prefetcher.Take(steps[i]));
    const Clock::time_point compute_start = Clock::now();
    OrDie(extractor.Extract(fetched.folder, probe.For(extractor, fetched.folder), {},
                            FileGate::Host()));
    const double compute = Seconds(compute_start);
    figures.download += fetched.stats.seconds;
    figures.compute += compute;
    figures.bytes_fetched += fetched.stats.bytes_fetched;
    figures.cache_hits += fetched.stats.cache_hit ? 1 : 0;
    std::printf("  %-40s download %6.2f s (%5.0f MB/s%s), compute %6.2f s\n",
                fetch::DescribeStep(steps[i].cache_step).c_str(), fetched.stats.seconds,
                fetched.stats.bytes_per_second / 1e6, fetched.stats.cache_hit ? ", cached" : "",
                compute);
    std::fflush(stdout);
  }  // each step's pin is dropped once its results exist, as a worker's after the upload
  figures.wall = Seconds(start);
  return figures;
}

int Run(const Options& options) {
  const fs::path script =
      fs::path(ANISOSCOPE_SOURCE_DIR) / "tests" / "sources" / "servers" / "hub_server.py";
  const fs::path work =
      fs::temp_directory_path() / ("source_pipeline_bench_" + std::to_string(::getpid()));
  fs::create_directories(work);
  hub_server = OrDie(bench::ChildProcess::Start(
      {"/usr/bin/python3", script.string(), "--root", options.root, "--port", "0", "--throttle",
       std::to_string(static_cast<int64_t>(options.throttle))},
      (work / "hub_server.log").string(), {"http://", "cdn "}));
  const std::string endpoint = "http://" + hub_server->After("http://");

  std::unique_ptr<transfer::HttpClient> client = OrDie(transfer::HttpClient::Create({}));
  listing::HubListingOptions listing_options;
  listing_options.endpoint = endpoint;
  listing_options.selection.glob = options.steps;
  const Clock::time_point listed_at = Clock::now();
  const listing::SourceListing listing =
      OrDie(listing::ListHubBranches(*client, options.repo, listing_options));
  const double listing_seconds = Seconds(listed_at);
  if (listing.steps.empty()) Die("the listing has no step");
  std::vector<fetch::FetchStep> steps;
  uint64_t series_bytes = 0, largest_file = 0;
  for (const listing::RemoteStep& step : listing.steps) {
    steps.push_back(OrDie(fetch::PlanFetch(step)));
    for (const listing::RemoteFile& file : step.files) {
      series_bytes += file.size;
      largest_file = std::max<uint64_t>(largest_file, file.size);
    }
  }

  const fs::path cache_dir = work / "cache";
  std::unique_ptr<cache::SourceCache> cache =
      OrDie(cache::SourceCache::Create({cache_dir, options.cache_max_bytes}));
  const fetch::StepFetcher fetcher(cache.get(), client.get());
  analysis::TorchExtractorOptions extractor_options;
  std::unique_ptr<analysis::Extractor> extractor =
      OrDie(analysis::CreateTorchExtractor(extractor_options));
  LazyProbe probe;
  probe.spec.file = options.probe;
  probe.spec.metric_groups = OrDie(analysis::ParseMetricGroups(options.metrics));

  std::printf(
      "%zu steps of %s (%.0f MB in all, the largest file %.0f MB), listed in %.2f s; server "
      "throttled to %.0f MB/s; cache bound %.0f MB; prefetch depth %d; metrics %s\n",
      steps.size(), options.repo.c_str(), series_bytes / 1e6, largest_file / 1e6, listing_seconds,
      options.throttle / 1e6, options.cache_max_bytes / 1e6, options.depth,
      options.metrics.c_str());
  PassFigures first;
  uint64_t disk_peak = 0;
  {
    DiskPeak disk(cache_dir);
    first = RunPass(steps, fetcher, *extractor, probe, options.depth);
    disk_peak = disk.peak();
  }
  const double per_step = (first.download + first.compute) / steps.size();
  const double goal = std::max(first.download, first.compute) + per_step;
  std::printf(
      "series: wall %.2f s; sum download %.2f s, sum compute %.2f s, one step %.2f s; wall / "
      "(max + one step) = %.3f (goal <= 1.15); wall / (sum + sum) = %.3f\n",
      first.wall, first.download, first.compute, per_step, first.wall / goal,
      first.wall / (first.download + first.compute));
  std::printf(
      "cache on disk: at most %.1f MB, bound %.1f MB + the largest file %.1f MB = %.1f MB (%s)\n",
      disk_peak / 1e6, options.cache_max_bytes / 1e6, largest_file / 1e6,
      (options.cache_max_bytes + largest_file) / 1e6,
      disk_peak <= options.cache_max_bytes + largest_file ? "held" : "EXCEEDED");
  if (options.second_pass) {
    const PassFigures again = RunPass(steps, fetcher, *extractor, probe, options.depth);
    std::printf("second pass: %d of %zu steps from the cache, %lld bytes fetched, wall %.2f s\n",
                again.cache_hits, steps.size(), static_cast<long long>(again.bytes_fetched),
                again.wall);
  }
  cache.reset();
  hub_server.reset();
  std::error_code ignored;
  fs::remove_all(work, ignored);
  return 0;
}

}  // namespace
}  // namespace anisoscope

int main(int argc, char** argv) {
  anisoscope::Options options;
  CLI::App app("source_pipeline_bench: a series from a local Hub through the bounded cache");
  app.add_option("--root", options.root, "hub_server.py's root: ROOT/ORG/NAME/<branch>/")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--repo", options.repo, "ORG/NAME under ROOT")->required();
  app.add_option("--probe", options.probe, "a token probe (JSON lines of ids)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--throttle", options.throttle, "the server's bytes per second")
      ->capture_default_str();
  app.add_option("--cache-max-bytes", options.cache_max_bytes, "the cache's bound (4GB, 900MB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--depth", options.depth, "steps downloaded ahead")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  app.add_option("--metrics", options.metrics, "the metric groups computed")->capture_default_str();
  app.add_option("--steps", options.steps, "a glob over the branches (default: every one)");
  app.add_flag("--second-pass", options.second_pass, "the series again, from the cache");
  CLI11_PARSE(app, argc, argv);
  return anisoscope::Run(options);
}
