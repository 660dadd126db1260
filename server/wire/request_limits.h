// The per-request limits that keep one client from hurting the others, in one place. Each
// refusal is RESOURCE_EXHAUSTED (HTTP 429) and names the limit and the flag that sets it.
// Every size is known before what it counts is loaded: series are counted in SQL first,
// vectors by their stored byte length, token probes while they are read (the read stops at
// the bound). Beside them, fixed: gRPC messages of at most kMaxMessageBytes
// (common/message_limits.h) both ways, and HTTP request lines of at most 8 KiB (httplib: 414).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace anisoscope::server {

struct RequestLimits {
  // --max-series-points: points one series query may answer (after max_points
  // downsampling), and points of one (layer, head) series a downsampled query may read;
  // about 65 bytes of JSON each.
  int64_t max_series_points = 2'000'000;
  // --max-vector-values: float64 values one vector query (vectors, trajectory, token cloud,
  // a per-block series' block) may read from the store; 8 bytes each (64 MiB).
  int64_t max_vector_values = int64_t{1} << 23;
  // --max-probe-tokens: token ids one job's probe may hold (samples x seq_len for a text
  // probe with a seq_len); 128 x 2048 by default.
  int64_t max_probe_tokens = 128 * 2048;
  // --max-watch-streams: WatchJob streams open at once, all callers together.
  int max_watch_streams = 1000;
  // --max-watch-streams-per-caller: of them, open by one caller (a token, a client
  // certificate; with --auth none every caller is one).
  int max_watch_streams_per_caller = 16;
  // --max-watch-streams-per-namespace: of them, open in one namespace.
  int max_watch_streams_per_namespace = 100;
};

// OK, or RESOURCE_EXHAUSTED when a series answer of `points` points passes the limit.
absl::Status CheckSeriesPoints(int64_t points, const RequestLimits& limits);
// RESOURCE_EXHAUSTED for a series read stopped at the limit (storage::SeriesResult::more).
absl::Status SeriesReadStopped(const RequestLimits& limits);
// OK, or RESOURCE_EXHAUSTED when one (layer, head) series of `points` points, read whole
// to be downsampled, passes the limit.
absl::Status CheckSeriesRead(int layer, int head, int64_t points, const RequestLimits& limits);
// The vector values one query may still read (--max-vector-values), spent read by read.
// Not thread-safe (one per query).
class VectorBudget {
 public:
  // `what` names the query in the refusal ("the trajectory query").
  VectorBudget(const RequestLimits& limits, std::string what)
      : limit_(limits.max_vector_values), what_(std::move(what)) {}
  int64_t left() const { return limit_ - spent_; }
  // Spends `values` (what a read found, before reading it): OK, or RESOURCE_EXHAUSTED
  // naming --max-vector-values when the query's reads together pass the limit.
  absl::Status Spend(int64_t values);

 private:
  const int64_t limit_;
  const std::string what_;
  int64_t spent_ = 0;
};

// OK, or RESOURCE_EXHAUSTED naming --max-probe-tokens when a probe of `tokens` passes it;
// `what` says how they were counted.
absl::Status CheckProbeTokens(int64_t tokens, const std::string& what, const RequestLimits& limits);

}  // namespace anisoscope::server
