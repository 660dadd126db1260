// http_query_bench: latency of the HTTP/JSON API for a full series query of a
// 12-layer x 12-head x 28-step run (4032 points), against the direct MetricsStore query
// measured in the same run. The API answers repeated queries from its ResponseCache, so
// the ratio is that of a kept answer sent over HTTP to a fresh store query.
//
//   build/bin/http_query_bench [--repeats N (default 50)]
//
// Builds a temporary SQLite store with synthetic values (every head metric, the hidden-state
// metrics and 64-dimensional q_mean/k_mean vectors, written with MetricsStore::WriteStep),
// starts HttpServer in process on 127.0.0.1:0 and times GETs over one keep-alive
// connection. Prints median and p95 milliseconds per configuration.
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/synthetic_run.h"
#include "server/http/http_server.h"
#include "storage/metrics_store.h"

namespace anisoscope {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "http_query_bench: %s\n", what.c_str());
  std::exit(1);
}

void FillStore(storage::MetricsStore* store) {
  for (int s = 0; s < bench::kSyntheticSteps; ++s) {
    if (absl::Status status = bench::WriteSyntheticStep(*store, s); !status.ok()) {
      Die(status.ToString());
    }
  }
}

struct Summary {
  double median_ms = 0;
  double p95_ms = 0;
};

Summary Time(int repeats, const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();  // warm up caches and the connection
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(std::ceil(q * ms.size())) - 1)];
  };
  return {at(0.5), at(0.95)};
}

int Main(int argc, char** argv) {
  int repeats = 50;
  CLI::App app("http_query_bench: latency of a full series over the HTTP/JSON API");
  app.add_option("--repeats", repeats, "GETs per configuration")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("http_query_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    auto store = storage::MetricsStore::Open({(dir / "bench.db").string()});
    if (!store.ok()) Die(store.status().ToString());
    FillStore(store->get());

    server::HttpServer::Options options;
    options.listen = "127.0.0.1:0";
    options.web_dir = (dir / "web").string();
    // The job routes are not called here, so no JobRunner is needed; no tokens (loopback).
    server::AccessControl access(server::AuthMode::kNone, store->get());
    auto http = server::HttpServer::Create(options, store->get(), /*runner=*/nullptr, &access);
    if (!http.ok()) Die(http.status().ToString());
    httplib::Client client((*http)->address());
    client.set_keep_alive(true);

    size_t body_bytes = 0;
    const auto get = [&](const std::string& path) {
      return [&, path] {
        httplib::Result res = client.Get(path.c_str());
        if (!res || res->status != 200) Die("GET " + path + " failed");
        body_bytes = res->body.size();
      };
    };
    const std::string full = "/api/v1/series?run=bench&metric=qk_mean_cosine";
    storage::SeriesQuery query;
    query.run = bench::kSyntheticRun;
    query.metric = "qk_mean_cosine";
    size_t points = 0;
    const Summary direct = Time(repeats, [&] {
      auto result = (*store)->QuerySeries(query);
      if (!result.ok()) Die(result.status().ToString());
      points = result->points.size();
    });
    const Summary http_full = Time(repeats, get(full));
    const size_t full_bytes = body_bytes;
    const Summary http_small = Time(repeats, get(full + "&max_points=8"));
    const size_t small_bytes = body_bytes;
    const Summary http_poll = Time(repeats, get(full + "&since_step=520000"));

    std::printf("run: %d layers x %d heads x %d steps; one metric, all heads = %zu points\n",
                bench::kSyntheticLayers, bench::kSyntheticHeads, bench::kSyntheticSteps, points);
    std::printf("%-44s %10s %10s %10s\n",
                ("query (repeats " + std::to_string(repeats) + ")").c_str(), "median ms", "p95 ms",
                "bytes");
    std::printf("%-44s %10.3f %10.3f %10s\n", "MetricsStore::QuerySeries (direct)",
                direct.median_ms, direct.p95_ms, "-");
    std::printf("%-44s %10.3f %10.3f %10zu\n", "GET /api/v1/series (full)", http_full.median_ms,
                http_full.p95_ms, full_bytes);
    std::printf("%-44s %10.3f %10.3f %10zu\n", "GET /api/v1/series&max_points=8",
                http_small.median_ms, http_small.p95_ms, small_bytes);
    std::printf("%-44s %10.3f %10.3f %10s\n", "GET /api/v1/series&since_step=<last> (poll)",
                http_poll.median_ms, http_poll.p95_ms, "-");
    std::printf("HTTP+JSON / direct (median): %.2fx\n", http_full.median_ms / direct.median_ms);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace anisoscope

int main(int argc, char** argv) { return anisoscope::Main(argc, argv); }
