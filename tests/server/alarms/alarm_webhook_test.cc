// AlarmWebhook (server/alarms/alarm_webhook.h) against real receivers on 127.0.0.1: an
// httplib::Server in a thread answering as each test scripts it, a socket that accepts
// connections but never answers, a port where nothing listens.
#include "server/alarms/alarm_webhook.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace anisoscope::server {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// An HTTP receiver on 127.0.0.1 whose n-th POST (1-based) is answered `status(n)`; a handler
// may be held until Release().
class Receiver {
 public:
  explicit Receiver(std::function<int(int)> status, bool hold = false)
      : status_(std::move(status)), hold_(hold) {
    server_.Post(".*", [this](const httplib::Request& request, httplib::Response& response) {
      int n;
      {
        std::unique_lock<std::mutex> lock(mu_);
        requests_.push_back({request.path, request.body, request.get_header_value("Content-Type")});
        n = static_cast<int>(requests_.size());
        arrived_.notify_all();
        released_cv_.wait(lock, [this] { return !hold_ || released_; });
      }
      response.status = status_(n);
      response.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost; wait for it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    Release();
    server_.stop();
    thread_.join();
  }

  struct Request {
    std::string path;
    std::string body;
    std::string content_type;
  };

  int port() const { return port_; }
  std::string Url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // Waits (at most 5 s) until `count` POSTs have arrived.
  bool WaitForRequests(size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    return arrived_.wait_for(lock, std::chrono::seconds(5),
                             [&] { return requests_.size() >= count; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    released_cv_.notify_all();
  }

 private:
  const std::function<int(int)> status_;
  const bool hold_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable arrived_;
  std::condition_variable released_cv_;
  bool released_ = false;
  std::vector<Request> requests_;
};

// A TCP socket on 127.0.0.1 that listens (connections complete in the backlog) but never
// accepts, reads or answers.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port where nothing listens (bound, read, and closed again).
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

storage::AlarmRecord Alarm() {
  storage::AlarmRecord alarm;
  alarm.id = 7;
  alarm.ns = "default";
  alarm.run = "bert-s0";
  alarm.probe_id = "p1";
  alarm.rule = "attention_entropy_collapse";
  alarm.metric = "attn_entropy";
  alarm.layer = 1;
  alarm.step = 12;
  alarm.value = 0.31;
  alarm.reference = 0.5;
  alarm.severity = "critical";
  alarm.summary = "mean attn_entropy over the heads of layer 1 is 0.31, below 0.5";
  alarm.fired_at = "2026-11-26T09:00:00Z";
  alarm.revision = 3;
  return alarm;
}

AlarmWebhook::Options Fast(const std::string& url) {
  AlarmWebhook::Options options;
  options.url = url;
  options.attempts = 3;
  options.first_backoff = absl::Milliseconds(10);
  options.timeout = absl::Seconds(2);
  return options;
}

std::unique_ptr<AlarmWebhook> Make(const AlarmWebhook::Options& options) {
  absl::StatusOr<std::unique_ptr<AlarmWebhook>> webhook = AlarmWebhook::Create(options);
  EXPECT_TRUE(webhook.ok()) << webhook.status();
  return webhook.ok() ? std::move(webhook).value() : nullptr;
}

// Waits (at most 5 s) until the outcomes add up to `total`.
AlarmWebhook::Counts WaitForOutcomes(const AlarmWebhook& webhook, int64_t total) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    const AlarmWebhook::Counts counts = webhook.counts();
    if (counts.delivered + counts.failed + counts.dropped >= total ||
        std::chrono::steady_clock::now() > deadline) {
      return counts;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(AlarmWebhookTest, PostsTheAlarmAsJson) {
  Receiver receiver([](int) { return 200; });
  auto webhook = Make(Fast(receiver.Url("/hooks/anisoscope")));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  storage::AlarmRecord resolved = Alarm();
  resolved.resolved_step = 14;
  resolved.resolved_at = "2026-11-26T09:05:00Z";
  resolved.revision = 4;
  webhook->Send(resolved);
  const AlarmWebhook::Counts counts = WaitForOutcomes(*webhook, 2);
  EXPECT_EQ(counts.delivered, 2);
  EXPECT_EQ(counts.failed, 0);

  const std::vector<Receiver::Request> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].path, "/hooks/anisoscope");
  EXPECT_THAT(requests[0].content_type, HasSubstr("application/json"));
  const json body = json::parse(requests[0].body);
  ASSERT_TRUE(body.contains("alarm")) << requests[0].body;
  EXPECT_EQ(body.size(), 1u);
  const json& alarm = body["alarm"];
  EXPECT_EQ(alarm["id"], "7");  // int64 as a string: the protobuf JSON mapping, as /api/v1
  EXPECT_EQ(alarm["namespace"], "default");
  EXPECT_EQ(alarm["run"], "bert-s0");
  EXPECT_EQ(alarm["probeId"], "p1");
  EXPECT_EQ(alarm["rule"], "attention_entropy_collapse");
  EXPECT_EQ(alarm["metric"], "attn_entropy");
  EXPECT_EQ(alarm["layer"], 1);
  EXPECT_EQ(alarm["step"], "12");
  EXPECT_EQ(alarm["value"], 0.31);
  EXPECT_EQ(alarm["reference"], 0.5);
  EXPECT_EQ(alarm["state"], "ALARM_STATE_FIRING");
  EXPECT_EQ(alarm["firedAt"], "2026-11-26T09:00:00Z");
  EXPECT_EQ(alarm["resolvedAt"], "");
  EXPECT_FALSE(alarm.contains("resolvedStep"));
  EXPECT_EQ(alarm["severity"], "critical");
  EXPECT_EQ(alarm["summary"], "mean attn_entropy over the heads of layer 1 is 0.31, below 0.5");
  EXPECT_EQ(alarm["revision"], "3");

  const json second = json::parse(requests[1].body)["alarm"];
  EXPECT_EQ(second["state"], "ALARM_STATE_RESOLVED");
  EXPECT_EQ(second["resolvedStep"], "14");
  EXPECT_EQ(second["resolvedAt"], "2026-11-26T09:05:00Z");
  EXPECT_EQ(second["revision"], "4");
}

TEST(AlarmWebhookTest, UrlWithoutPathPostsToTheRoot) {
  Receiver receiver([](int) { return 204; });
  auto webhook = Make(Fast("http://127.0.0.1:" + std::to_string(receiver.port())));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  EXPECT_EQ(WaitForOutcomes(*webhook, 1).delivered, 1);  // any 2xx
  ASSERT_EQ(receiver.requests().size(), 1u);
  EXPECT_EQ(receiver.requests()[0].path, "/");
}

TEST(AlarmWebhookTest, UnavailableReceiverIsRetriedUntilItTakesTheAlarm) {
  Receiver receiver([](int n) { return n <= 2 ? 503 : 200; });
  auto webhook = Make(Fast(receiver.Url()));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  const AlarmWebhook::Counts counts = WaitForOutcomes(*webhook, 1);
  EXPECT_EQ(counts.delivered, 1);
  EXPECT_EQ(counts.failed, 0);
  const std::vector<Receiver::Request> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].body, requests[0].body);  // the same alarm each time
}

TEST(AlarmWebhookTest, TooManyRequestsAndTimeoutAnswersAreRetried) {
  Receiver receiver([](int n) { return n == 1 ? 429 : n == 2 ? 408 : 200; });
  auto webhook = Make(Fast(receiver.Url()));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  EXPECT_EQ(WaitForOutcomes(*webhook, 1).delivered, 1);
  EXPECT_EQ(receiver.requests().size(), 3u);
}

TEST(AlarmWebhookTest, ReceiverFailingEveryAttemptCountsFailed) {
  Receiver receiver([](int) { return 500; });
  auto webhook = Make(Fast(receiver.Url()));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  const AlarmWebhook::Counts counts = WaitForOutcomes(*webhook, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.delivered, 0);
  EXPECT_EQ(receiver.requests().size(), 3u);  // attempts = 3
}

TEST(AlarmWebhookTest, ClientErrorIsNotRetried) {
  Receiver receiver([](int) { return 400; });
  auto webhook = Make(Fast(receiver.Url()));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  const AlarmWebhook::Counts counts = WaitForOutcomes(*webhook, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.delivered, 0);
  // Give a retry, were there one, time to arrive (backoff 10 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(receiver.requests().size(), 1u);
}

TEST(AlarmWebhookTest, UnreachableReceiverFailsAfterEveryAttempt) {
  AlarmWebhook::Options options = Fast("http://127.0.0.1:" + std::to_string(UnusedPort()) + "/x");
  options.attempts = 4;
  auto webhook = Make(options);
  ASSERT_NE(webhook, nullptr);
  const auto start = std::chrono::steady_clock::now();
  webhook->Send(Alarm());
  const AlarmWebhook::Counts counts = WaitForOutcomes(*webhook, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.delivered, 0);
  // Backoff 10 + 20 + 40 ms between the 4 attempts: at least 70 ms in all.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(70));
}

TEST(AlarmWebhookTest, FullQueueDropsAndCountsDropped) {
  Receiver receiver([](int) { return 200; }, /*hold=*/true);
  AlarmWebhook::Options options = Fast(receiver.Url());
  options.max_queued = 1;
  auto webhook = Make(options);
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());  // taken from the queue, held by the receiver
  ASSERT_TRUE(receiver.WaitForRequests(1));
  webhook->Send(Alarm());  // waits in the queue
  webhook->Send(Alarm());  // dropped
  webhook->Send(Alarm());  // dropped
  EXPECT_EQ(webhook->counts().dropped, 2);
  EXPECT_THAT(webhook->Exposition(),
              HasSubstr("anisoscope_alarm_webhook_deliveries_total{outcome=\"dropped\"} 2\n"));

  receiver.Release();
  const AlarmWebhook::Counts counts = WaitForOutcomes(*webhook, 4);
  EXPECT_EQ(counts.delivered, 2);
  EXPECT_EQ(counts.dropped, 2);
  EXPECT_EQ(receiver.requests().size(), 2u);
}

TEST(AlarmWebhookTest, ExpositionHasEveryOutcome) {
  Receiver receiver([](int) { return 200; });
  auto webhook = Make(Fast(receiver.Url()));
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  WaitForOutcomes(*webhook, 1);
  const std::string text = webhook->Exposition();
  EXPECT_THAT(text, HasSubstr("# TYPE anisoscope_alarm_webhook_deliveries_total counter\n"));
  EXPECT_THAT(text,
              HasSubstr("anisoscope_alarm_webhook_deliveries_total{outcome=\"delivered\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("anisoscope_alarm_webhook_deliveries_total{outcome=\"failed\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("anisoscope_alarm_webhook_deliveries_total{outcome=\"dropped\"} 0\n"));
}

TEST(AlarmWebhookTest, DestructorReturnsPromptlyWhenTheReceiverNeverAnswers) {
  SilentListener listener;
  AlarmWebhook::Options options =
      Fast("http://127.0.0.1:" + std::to_string(listener.port()) + "/hook");
  options.timeout = absl::Milliseconds(300);
  options.attempts = 5;
  auto webhook = Make(options);
  ASSERT_NE(webhook, nullptr);
  for (int i = 0; i < 3; ++i) webhook->Send(Alarm());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the first POST is waiting
  const auto start = std::chrono::steady_clock::now();
  webhook.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(AlarmWebhookTest, DestructorCutsTheBackoffShort) {
  Receiver receiver([](int) { return 503; });
  AlarmWebhook::Options options = Fast(receiver.Url());
  options.first_backoff = absl::Seconds(30);
  auto webhook = Make(options);
  ASSERT_NE(webhook, nullptr);
  webhook->Send(Alarm());
  ASSERT_TRUE(receiver.WaitForRequests(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // now in the backoff
  const auto start = std::chrono::steady_clock::now();
  webhook.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(receiver.requests().size(), 1u);
}

TEST(AlarmWebhookTest, CreateRefusesWhatIsNotAnHttpUrl) {
  for (const char* url :
       {"", "ftp://example.com/hook", "example.com:8080/hook", "http://", "http:///hook",
        "http://host name/hook", "file:///etc/passwd", "http://host/#fragment"}) {
    AlarmWebhook::Options options;
    options.url = url;
    const absl::StatusOr<std::unique_ptr<AlarmWebhook>> webhook = AlarmWebhook::Create(options);
    ASSERT_FALSE(webhook.ok()) << url;
    EXPECT_EQ(webhook.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_THAT(std::string(webhook.status().message()), HasSubstr("--alarm-webhook")) << url;
  }
  for (const char* url : {"http://127.0.0.1:9/hook", "https://alerts.example.com/a/b?token=x",
                          "http://[::1]:8080/"}) {
    AlarmWebhook::Options options;
    options.url = url;
    EXPECT_TRUE(AlarmWebhook::Create(options).ok()) << url;
  }
}

// Create accepts the scheme in any case (URLs are case-insensitive there); what it accepts
// must then reach the receiver (httplib::Client knows lower-case schemes only).
TEST(AlarmWebhookTest, UppercaseSchemeIsDeliveredOrRefused) {
  Receiver receiver([](int) { return 200; });
  AlarmWebhook::Options options =
      Fast("HTTP://127.0.0.1:" + std::to_string(receiver.port()) + "/h");
  options.attempts = 1;
  const absl::StatusOr<std::unique_ptr<AlarmWebhook>> webhook = AlarmWebhook::Create(options);
  if (!webhook.ok()) {
    EXPECT_EQ(webhook.status().code(), absl::StatusCode::kInvalidArgument);
    return;
  }
  (*webhook)->Send(Alarm());
  const AlarmWebhook::Counts counts = WaitForOutcomes(**webhook, 1);
  EXPECT_EQ(counts.delivered, 1) << "an accepted HTTP:// URL was never delivered to";
}

}  // namespace
}  // namespace anisoscope::server
