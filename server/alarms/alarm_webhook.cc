#include "server/alarms/alarm_webhook.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/proto_json.h"
#include "server/monitoring/service_metrics.h"
#include "server/wire/proto_convert.h"

namespace anisoscope::server {

absl::StatusOr<std::unique_ptr<AlarmWebhook>> AlarmWebhook::Create(const Options& options) {
  static const std::regex kUrl(R"((https?://[^/?#\s]+)(/[^#\s]*)?)", std::regex::icase);
  std::smatch match;
  if (!std::regex_match(options.url, match, kUrl)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--alarm-webhook '", options.url, "' is not an http:// or https://HOST[:PORT][/PATH] URL"));
  }
  const std::string path = match[2].matched ? match[2].str() : "/";
  // httplib knows its schemes in lower case only.
  std::string origin = match[1].str();
  const size_t scheme_end = origin.find(':');
  for (size_t i = 0; i < scheme_end; ++i) origin[i] = absl::ascii_tolower(origin[i]);
  return std::unique_ptr<AlarmWebhook>(new AlarmWebhook(options, std::move(origin), path));
}

AlarmWebhook::AlarmWebhook(Options options, std::string origin, std::string path)
    : options_(std::move(options)), origin_(std::move(origin)), path_(std::move(path)) {
  thread_ = std::thread([this] { Run(); });
}

AlarmWebhook::~AlarmWebhook() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void AlarmWebhook::Send(const storage::AlarmRecord& alarm) {
  pb::Alarm message;
  ToProto(alarm, &message);
  absl::StatusOr<std::string> json = ProtoToJson(message);
  absl::MutexLock lock(&mu_);
  if (!json.ok()) {  // counted as dropped, like an alarm the full queue turns away
    ++counts_.dropped;
    spdlog::error("alarm webhook: alarm {} dropped: {}", alarm.id, json.status().ToString());
    return;
  }
  std::string body = absl::StrCat("{\"alarm\":", *json, "}");
  if (queue_.size() >= static_cast<size_t>(options_.max_queued)) {
    ++counts_.dropped;
    spdlog::warn("alarm webhook: {} alarms wait already; alarm {} ({} of run '{}') dropped",
                 queue_.size(), alarm.id, alarm.rule, alarm.run);
    return;
  }
  queue_.push_back(std::move(body));
}

AlarmWebhook::Counts AlarmWebhook::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::string AlarmWebhook::Exposition() const {
  const Counts counts = this->counts();
  std::string out;
  AppendHeader("anisoscope_alarm_webhook_deliveries_total", "counter",
               "Alarms sent to --alarm-webhook, by outcome (failed: every attempt failed or the "
               "receiver refused it; dropped: too many waited).",
               &out);
  for (const auto& [outcome, count] :
       {std::pair<const char*, int64_t>{"delivered", counts.delivered},
        {"failed", counts.failed},
        {"dropped", counts.dropped}}) {
    absl::StrAppend(&out, "anisoscope_alarm_webhook_deliveries_total{outcome=\"", outcome, "\"} ",
                    count, "\n");
  }
  return out;
}

void AlarmWebhook::Run() {
  while (true) {
    std::string body;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AlarmWebhook* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (stopping_) {  // the alarms stay stored; only their notice is lost
        counts_.dropped += static_cast<int64_t>(queue_.size());
        queue_.clear();
        return;
      }
      body = std::move(queue_.front());
      queue_.pop_front();
    }
    const bool delivered = Deliver(body);
    absl::MutexLock lock(&mu_);
    ++(delivered ? counts_.delivered : counts_.failed);
  }
}

bool AlarmWebhook::Deliver(const std::string& body) {
  httplib::Client client(origin_);
  const auto seconds = absl::ToInt64Seconds(options_.timeout);
  const auto micros = absl::ToInt64Microseconds(options_.timeout) % 1000000;
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  absl::Duration backoff = options_.first_backoff;
  for (int attempt = 1; attempt <= options_.attempts; ++attempt) {
    const httplib::Result result = client.Post(path_, body, "application/json");
    std::string failure;
    if (!result) {
      failure = httplib::to_string(result.error());
    } else if (result->status >= 200 && result->status < 300) {
      return true;
    } else if (result->status == 408 || result->status == 429 || result->status >= 500) {
      failure = absl::StrCat("HTTP ", result->status);
    } else {
      spdlog::warn("alarm webhook {}{}: HTTP {}; not retried", origin_, path_, result->status);
      return false;
    }
    if (attempt == options_.attempts) {
      spdlog::warn("alarm webhook {}{}: {} after {} attempts; alarm not delivered", origin_, path_,
                   failure, attempt);
      return false;
    }
    {
      // Waits out the backoff unless the server stops meanwhile.
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff)) return false;
    }
    backoff *= 2;
  }
  return false;
}

}  // namespace anisoscope::server
