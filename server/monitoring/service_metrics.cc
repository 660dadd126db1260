#include "server/monitoring/service_metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "analysis/models/model_shape.h"
#include "common/json_text.h"

namespace anisoscope::server {
namespace {

std::string LabelText(const Histogram::Labels& labels) {
  std::string text;
  for (const auto& [name, value] : labels) {
    absl::StrAppend(&text, text.empty() ? "{" : ",", name, "=\"", EscapeLabelValue(value), "\"");
  }
  return text.empty() ? text : text + "}";
}

void AppendGauge(const std::string& name, const std::string& help, int64_t value,
                 std::string* out) {
  AppendHeader(name, "gauge", help, out);
  absl::StrAppend(out, name, " ", value, "\n");
}

// Label values that come from workers are one of a fixed set, so that no worker can grow the
// exposition: anything else is "other".
constexpr char kOtherLabel[] = "other";

// "cuda:0 (NVIDIA H100)" -> "cuda"; "cpu" -> "cpu"; "" -> "unknown"; any other -> "other".
std::string DeviceKind(const std::string& device) {
  const std::string kind = device.substr(0, device.find_first_of(": ("));
  if (kind.empty()) return "unknown";
  return kind == "cpu" || kind == "cuda" ? kind : kOtherLabel;
}

// A family the engine makes (analysis::ModelFamilies), else "other".
std::string FamilyLabel(const std::string& family) {
  const std::vector<std::string>& families = analysis::ModelFamilies();
  return std::find(families.begin(), families.end(), family) != families.end() ? family
                                                                               : kOtherLabel;
}

}  // namespace

std::string PrometheusNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return ShortestDouble(value);
}

void AppendHeader(const std::string& name, const std::string& type, const std::string& help,
                  std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string EscapeLabelValue(const std::string& text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

void Histogram::Observe(const Labels& labels, double value) {
  Series& series = series_[labels];
  if (series.counts.empty()) series.counts.assign(upper_bounds_.size(), 0);
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (value <= upper_bounds_[i]) {
      ++series.counts[i];
      break;
    }
  }
  ++series.count;
  series.sum += value;
}

void Histogram::AppendExposition(const std::string& name, const std::string& help,
                                 std::string* out) const {
  AppendHeader(name, "histogram", help, out);
  for (const auto& [labels, series] : series_) {
    int64_t cumulative = 0;
    for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
      Labels with_bound = labels;
      if (i < upper_bounds_.size()) {
        cumulative += series.counts[i];
        with_bound.emplace_back("le", PrometheusNumber(upper_bounds_[i]));
      } else {
        cumulative = series.count;
        with_bound.emplace_back("le", "+Inf");
      }
      absl::StrAppend(out, name, "_bucket", LabelText(with_bound), " ", cumulative, "\n");
    }
    absl::StrAppend(out, name, "_sum", LabelText(labels), " ", PrometheusNumber(series.sum), "\n");
    absl::StrAppend(out, name, "_count", LabelText(labels), " ", series.count, "\n");
  }
}

ServiceMetrics::ServiceMetrics()
    : checkpoint_seconds_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000}),
      query_seconds_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}) {}

void ServiceMetrics::RecordCheckpoint(const std::string& family, const std::string& device,
                                      double seconds) {
  const Histogram::Labels labels = {{"family", FamilyLabel(family)},
                                    {"device", DeviceKind(device)}};
  absl::MutexLock lock(&mu_);
  ++checkpoints_[labels];
  checkpoint_seconds_.Observe(labels, seconds);
}

void ServiceMetrics::RecordQuery(const std::string& api, const std::string& method,
                                 double seconds) {
  absl::MutexLock lock(&mu_);
  query_seconds_.Observe({{"api", api}, {"method", method}}, seconds);
}

void ServiceMetrics::RecordFetch(const Fetch& fetch) {
  absl::MutexLock lock(&mu_);
  ++steps_fetched_;
  if (fetch.cache_hit) ++cache_hits_;
  fetched_.bytes += std::max<int64_t>(fetch.bytes, 0);
  fetched_.retries += std::max<int64_t>(fetch.retries, 0);
  if (std::isfinite(fetch.seconds) && fetch.seconds > 0) fetched_.seconds += fetch.seconds;
}

std::string ServiceMetrics::Exposition(const Gauges& gauges) const {
  std::string out;
  AppendHeader("anisoscope_jobs", "gauge", "Jobs in the database by state.", &out);
  for (const auto& [state, count] : gauges.jobs_by_state) {
    absl::StrAppend(&out, "anisoscope_jobs{state=\"", EscapeLabelValue(state), "\"} ", count, "\n");
  }
  AppendGauge("anisoscope_queued_steps", "Checkpoints waiting for a worker (queue depth).",
              gauges.queued_steps, &out);
  AppendGauge("anisoscope_active_leases", "Checkpoints leased to a worker now.",
              gauges.active_leases, &out);
  AppendGauge("anisoscope_workers", "Workers holding a lease or waiting for one.", gauges.workers,
              &out);
  AppendGauge("anisoscope_database_bytes", "Size of the SQLite database (pages in use).",
              gauges.database_bytes, &out);
  AppendGauge("anisoscope_http_threads", "HTTP request threads started (--http-threads caps them).",
              gauges.http_threads, &out);
  AppendGauge("anisoscope_http_busy_threads",
              "HTTP request threads serving a connection (kept-alive idle ones included).",
              gauges.http_busy_threads, &out);
  AppendGauge("anisoscope_http_waiting_connections",
              "HTTP connections accepted that wait for a request thread.",
              gauges.http_waiting_connections, &out);
  AppendHeader("anisoscope_http_refused_connections_total", "counter",
               "HTTP connections answered 503 because every thread was busy and "
               "--http-max-queued connections waited.",
               &out);
  absl::StrAppend(&out, "anisoscope_http_refused_connections_total ",
                  gauges.http_refused_connections, "\n");
  absl::MutexLock lock(&mu_);
  AppendHeader("anisoscope_checkpoints_analysed_total", "counter",
               "Checkpoints analysed and stored since the server started.", &out);
  for (const auto& [labels, count] : checkpoints_) {
    absl::StrAppend(&out, "anisoscope_checkpoints_analysed_total", LabelText(labels), " ", count,
                    "\n");
  }
  checkpoint_seconds_.AppendExposition(
      "anisoscope_checkpoint_seconds",
      "Seconds a worker took per checkpoint (load, forward and metrics).", &out);
  query_seconds_.AppendExposition("anisoscope_query_seconds",
                                  "Seconds to answer a query, by API and method.", &out);
  const auto counter = [&out](const char* name, const char* help, const std::string& value) {
    AppendHeader(name, "counter", help, &out);
    absl::StrAppend(&out, name, " ", value, "\n");
  };
  counter("anisoscope_source_steps_fetched_total",
          "Remote steps (Hub, S3) a worker fetched and the server stored.",
          absl::StrCat(steps_fetched_));
  counter("anisoscope_source_cache_hits_total",
          "Remote steps found whole in a worker's cache: no request made.",
          absl::StrCat(cache_hits_));
  counter("anisoscope_source_bytes_fetched_total",
          "Body bytes workers received fetching remote steps, retries included.",
          absl::StrCat(fetched_.bytes));
  counter("anisoscope_source_fetch_retries_total",
          "Requests workers retried fetching remote steps (429, 5xx, cuts, stalls).",
          absl::StrCat(fetched_.retries));
  counter("anisoscope_source_fetch_seconds_total", "Seconds workers spent fetching remote steps.",
          PrometheusNumber(fetched_.seconds));
  return out;
}

}  // namespace anisoscope::server
