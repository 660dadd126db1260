// ServiceMetrics: what the running server counts about itself (checkpoints analysed and
// their seconds, query latency, remote steps fetched), and the Prometheus text exposition (format 0.0.4) of those
// counts beside the gauges a scrape reads at that moment (jobs by state, queue depth,
// leases, workers, database size).
//
// Thread-safe: Record* may be called from any thread (a mutex guards the counts).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace anisoscope::server {

// A cumulative histogram per label set (Prometheus semantics: bucket i counts values <=
// upper_bounds[i]; +Inf, _sum and _count are added when printed). Not thread-safe.
class Histogram {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;  // name, value

  explicit Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {}
  void Observe(const Labels& labels, double value);
  // The `# TYPE` line and every series of metric `name`.
  void AppendExposition(const std::string& name, const std::string& help, std::string* out) const;

 private:
  struct Series {
    std::vector<int64_t> counts;  // per upper bound, not cumulative
    int64_t count = 0;
    double sum = 0;
  };
  std::vector<double> upper_bounds_;
  std::map<Labels, Series> series_;
};

class ServiceMetrics {
 public:
  // What a scrape reads from the job runner and the store at that moment.
  struct Gauges {
    std::map<std::string, int64_t> jobs_by_state;  // every state, zeros included
    int64_t queued_steps = 0;                      // pending, waiting for a worker
    int64_t active_leases = 0;
    int64_t workers = 0;  // distinct workers holding a lease or waiting for one
    int64_t database_bytes = 0;
    // The HTTP server's request threads (HttpThreadPool): started, serving a connection, and
    // the connections accepted that wait for one.
    int64_t http_threads = 0;
    int64_t http_busy_threads = 0;
    int64_t http_waiting_connections = 0;
    // Connections answered 503 since the start: threads busy and --http-max-queued waiting.
    int64_t http_refused_connections = 0;
  };

  ServiceMetrics();

  // A checkpoint analysed and stored: `family` (e.g. "bert"; one the engine does not make is
  // labelled "other"), `device` (a worker's device text, e.g. "cuda:0 (NVIDIA H100)";
  // labelled by its kind, "cuda" or "cpu", else "other") and its seconds. Both come from
  // workers: the label values are a fixed set.
  void RecordCheckpoint(const std::string& family, const std::string& device, double seconds);
  // A query answered: `api` "grpc" or "http", `method` e.g. "QuerySeries" or "/api/v1/series".
  void RecordQuery(const std::string& api, const std::string& method, double seconds);
  // What fetching one remote step cost its worker (CompleteWorkRequest.fetch): whether it
  // was whole in the worker's cache, body bytes received, retries and seconds. The numbers
  // come from workers: a negative or non-finite one counts as 0.
  struct Fetch {
    bool cache_hit = false;
    int64_t bytes = 0;
    int64_t retries = 0;
    double seconds = 0;
  };
  void RecordFetch(const Fetch& fetch);

  // The whole exposition: the counts recorded so far and `gauges`.
  std::string Exposition(const Gauges& gauges) const;

 private:
  mutable absl::Mutex mu_;
  std::map<Histogram::Labels, int64_t> checkpoints_ ABSL_GUARDED_BY(mu_);
  Histogram checkpoint_seconds_ ABSL_GUARDED_BY(mu_);
  Histogram query_seconds_ ABSL_GUARDED_BY(mu_);
  // The remote steps fetched and what they cost (anisoscope_source_*_total), since the start.
  Fetch fetched_ ABSL_GUARDED_BY(mu_);
  int64_t steps_fetched_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cache_hits_ ABSL_GUARDED_BY(mu_) = 0;
};

// The Prometheus label value of `text` (backslash, double quote and newline escaped).
std::string EscapeLabelValue(const std::string& text);
// A sample value as Prometheus spells it (NaN, +Inf and -Inf for the non-finite ones).
std::string PrometheusNumber(double value);
// The "# HELP" and "# TYPE" lines of metric `name` of `type` ("gauge", "counter", ...).
void AppendHeader(const std::string& name, const std::string& type, const std::string& help,
                  std::string* out);

}  // namespace anisoscope::server
