#include "bench/http_pollers.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/http/encoded_response.h"

namespace anisoscope::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One poller: its curl handle, what it has seen and the request in flight.
struct Poller {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  std::string etag;         // of the last 200 answer
  std::string answer_etag;  // of the answer being received
  bool gzipped = false;     // the answer being received is
  int64_t newest = -1;
  Clock::time_point sent;
};

size_t AppendBody(char* data, size_t size, size_t count, void* poller) {
  static_cast<Poller*>(poller)->body.append(data, size * count);
  return size * count;
}

size_t ReadHeader(char* data, size_t size, size_t count, void* poller) {
  absl::string_view line(data, size * count);
  if (absl::StartsWithIgnoreCase(line, "etag:")) {
    line.remove_prefix(5);
    static_cast<Poller*>(poller)->answer_etag = std::string(absl::StripAsciiWhitespace(line));
  } else if (absl::StartsWithIgnoreCase(line, "content-encoding:")) {
    static_cast<Poller*>(poller)->gzipped = absl::StrContains(absl::AsciiStrToLower(line), "gzip");
  }
  return size * count;
}

// Drives `count` pollers on this thread until `end`, then lets the requests in flight end.
LoadReport Drive(const PollerOptions& options, const PathFor& path_for, int count,
                 Clock::time_point end) {
  LoadReport report;
  CURLM* multi = curl_multi_init();
  std::vector<Poller> pollers(count);
  const auto start = [&](Poller& poller) {
    poller.body.clear();
    poller.answer_etag.clear();
    poller.gzipped = false;
    curl_slist_free_all(poller.headers);
    poller.headers = nullptr;
    // Asked for by hand (not CURLOPT_ACCEPT_ENCODING), so that curl leaves the body as it
    // came and the pollers spend nothing on inflating what they do not read.
    if (options.kind != ClientKind::kPlain) {
      poller.headers = curl_slist_append(poller.headers, "Accept-Encoding: gzip");
    }
    if (options.kind == ClientKind::kBrowser && !poller.etag.empty()) {
      poller.headers =
          curl_slist_append(poller.headers, absl::StrCat("If-None-Match: ", poller.etag).c_str());
    }
    const std::string url = absl::StrCat("http://", options.address, path_for(poller.newest));
    curl_easy_setopt(poller.easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(poller.easy, CURLOPT_HTTPHEADER, poller.headers);
    poller.sent = Clock::now();
    curl_multi_add_handle(multi, poller.easy);
  };
  for (Poller& poller : pollers) {
    poller.easy = curl_easy_init();
    curl_easy_setopt(poller.easy, CURLOPT_PRIVATE, &poller);
    curl_easy_setopt(poller.easy, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(poller.easy, CURLOPT_WRITEDATA, &poller);
    curl_easy_setopt(poller.easy, CURLOPT_HEADERFUNCTION, ReadHeader);
    curl_easy_setopt(poller.easy, CURLOPT_HEADERDATA, &poller);
    curl_easy_setopt(poller.easy, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(poller.easy, CURLOPT_NOSIGNAL, 1L);
    if (options.kind == ClientKind::kPlain) curl_easy_setopt(poller.easy, CURLOPT_FORBID_REUSE, 1L);
    start(poller);
  }
  int running = count;
  // Pollers pausing before their next request, and when they ask again.
  std::vector<std::pair<Clock::time_point, Poller*>> resting;
  const auto pause = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options.pause_ms));
  while (running > 0 || !resting.empty()) {
    const Clock::time_point now = Clock::now();
    for (auto it = resting.begin(); it != resting.end();) {
      if (it->first > now) {
        ++it;
        continue;
      }
      if (now < end) start(*it->second);
      it = resting.erase(it);
    }
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      Poller* poller = nullptr;
      curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &poller);
      report.latency_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - poller->sent).count());
      ++report.requests;
      long status = 0;
      curl_easy_getinfo(poller->easy, CURLINFO_RESPONSE_CODE, &status);
      if (message->data.result != CURLE_OK || (status != 200 && status != 304)) {
        ++report.errors;
        if (report.first_error.empty()) {
          report.first_error = message->data.result != CURLE_OK
                                   ? curl_easy_strerror(message->data.result)
                                   : absl::StrCat("HTTP ", status, ": ", poller->body);
        }
        poller->etag.clear();
      } else if (status == 304) {
        ++report.not_modified;
      } else {
        report.body_bytes += static_cast<int64_t>(poller->body.size());
        if (options.read_steps) {
          poller->newest =
              std::max(poller->newest,
                       NewestStepIn(poller->gzipped ? server::Gunzip(poller->body) : poller->body));
        }
        poller->etag = poller->answer_etag;
      }
      curl_multi_remove_handle(multi, poller->easy);
      if (Clock::now() >= end) continue;
      if (options.pause_ms > 0) {
        resting.emplace_back(Clock::now() + pause, poller);
      } else {
        start(*poller);
        ++running;
      }
    }
    if (running > 0 || !resting.empty()) {
      curl_multi_poll(multi, nullptr, 0, options.pause_ms > 0 ? 5 : 100, nullptr);
    }
  }
  for (Poller& poller : pollers) {
    curl_slist_free_all(poller.headers);
    curl_easy_cleanup(poller.easy);
  }
  curl_multi_cleanup(multi);
  return report;
}

}  // namespace

void LoadReport::Add(const LoadReport& part) {
  requests += part.requests;
  errors += part.errors;
  not_modified += part.not_modified;
  body_bytes += part.body_bytes;
  latency_ms.insert(latency_ms.end(), part.latency_ms.begin(), part.latency_ms.end());
  if (first_error.empty()) first_error = part.first_error;
}

double LoadReport::Percentile(double q) const {
  if (latency_ms.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * latency_ms.size()));
  return latency_ms[std::min(latency_ms.size() - 1, rank == 0 ? 0 : rank - 1)];
}

int64_t NewestStepIn(const std::string& json) {
  static constexpr char kKey[] = "\"step\":\"";
  int64_t newest = -1;
  for (size_t at = json.find(kKey); at != std::string::npos; at = json.find(kKey, at + 1)) {
    const size_t start = at + sizeof(kKey) - 1;
    const size_t end = json.find('"', start);
    int64_t step = 0;
    if (end != std::string::npos && absl::SimpleAtoi(json.substr(start, end - start), &step)) {
      newest = std::max(newest, step);
    }
  }
  return newest;
}

LoadReport DrivePollers(const PollerOptions& options, const PathFor& path_for) {
  static const CURLcode initialized = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)initialized;
  const Clock::time_point begin = Clock::now();
  const Clock::time_point end = begin + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(options.seconds));
  // A client thread per core (at most four), each with its share of the pollers.
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                                 std::min(4, std::max(1, options.clients)));
  std::mutex mu;
  LoadReport report;
  std::vector<std::thread> drivers;
  for (int t = 0; t < threads; ++t) {
    const int count = options.clients / threads + (t < options.clients % threads ? 1 : 0);
    drivers.emplace_back([&, count] {
      LoadReport mine = Drive(options, path_for, count, end);
      std::lock_guard<std::mutex> lock(mu);
      report.Add(mine);
    });
  }
  for (std::thread& driver : drivers) driver.join();
  report.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  std::sort(report.latency_ms.begin(), report.latency_ms.end());
  return report;
}

}  // namespace anisoscope::bench
