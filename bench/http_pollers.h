// HTTP pollers for the load benchmarks: N concurrent clients, each asking the server for a
// path again as soon as it is answered (or after a pause), for a while, like dashboards.
// They run on libcurl's multi interface (a few client threads, each driving its share of
// the pollers' connections through epoll), so that the client costs little of the machine
// the server shares with it. Every request's latency is recorded; an error is a failed
// request or a status other than 200 and 304.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace anisoscope::bench {

// How a poller asks.
enum class ClientKind {
  // Like a browser: kept-alive connection, "Accept-Encoding: gzip", If-None-Match with the
  // last answer's ETag.
  kBrowser,
  // Kept-alive connection and gzip, no If-None-Match: a dashboard opening for the first time.
  kFirstVisit,
  // A new connection per request, plain answers, no ETag (what wrk measured in issue 15).
  kPlain,
};

struct PollerOptions {
  std::string address;  // HOST:PORT
  int clients = 100;
  double seconds = 10;
  ClientKind kind = ClientKind::kBrowser;
  // Pause between an answer and the poller's next request (0: ask again at once).
  double pause_ms = 0;
  // Read the newest step out of each answer (inflating gzipped ones) for PathFor; off, the
  // bodies are counted only.
  bool read_steps = true;
};

struct LoadReport {
  int64_t requests = 0;
  int64_t errors = 0;
  int64_t not_modified = 0;  // 304 answers
  int64_t body_bytes = 0;    // of the 200 answers, as sent (gzipped or not)
  double seconds = 0;
  std::vector<double> latency_ms;  // sorted
  std::string first_error;

  // Adds `part`'s counts, latencies and (when none yet) first error.
  void Add(const LoadReport& part);
  double Percentile(double q) const;  // q in [0, 1] of sorted latencies; 0 when none
  double RequestsPerSecond() const { return seconds > 0 ? requests / seconds : 0; }
};

// The path a poller asks for next, given the newest step it has seen in an answer (-1
// before the first).
using PathFor = std::function<std::string(int64_t newest_step)>;

LoadReport DrivePollers(const PollerOptions& options, const PathFor& path_for);

// The largest "step":"N" in a series answer's JSON; -1 when there is none.
int64_t NewestStepIn(const std::string& json);

}  // namespace anisoscope::bench
