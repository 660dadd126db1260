// AlarmStepObserver (server/alarms/alarm_step_observer.h) with the default rules over a real
// SQLite store: what a stored step fires or resolves is told to the step's job, once; a
// webhook receiver on 127.0.0.1 is told only what starts or stops firing.
#include "server/alarms/alarm_step_observer.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/alarms/alarm_rules.h"
#include "storage/metrics_store.h"
#include "tests/common/test_temp_dir.h"

namespace anisoscope::server {
namespace {

namespace pb = ::anisoscope::v1;

constexpr int64_t kJobId = 42;

class FakeNotices final : public JobNotices {
 public:
  void PublishAlarm(int64_t job_id, const pb::Alarm& alarm) override {
    published.emplace_back(job_id, alarm);
  }
  std::vector<std::pair<int64_t, pb::Alarm>> published;
};

// An HTTP receiver on 127.0.0.1 that answers 200 and keeps each POSTed alarm's
// (step, state).
class WebhookReceiver {
 public:
  WebhookReceiver() {
    server_.Post(".*", [this](const httplib::Request& request, httplib::Response& response) {
      const nlohmann::json body = nlohmann::json::parse(request.body);
      std::lock_guard<std::mutex> lock(mu_);
      alarms_.emplace_back(body["alarm"]["step"].get<std::string>(),
                           body["alarm"]["state"].get<std::string>());
      arrived_.notify_all();
      response.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~WebhookReceiver() {
    server_.stop();
    thread_.join();
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  // Waits (at most 5 s) for `count` POSTs; the (step, state) of each that came.
  std::vector<std::pair<std::string, std::string>> WaitFor(size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    arrived_.wait_for(lock, std::chrono::seconds(5), [&] { return alarms_.size() >= count; });
    return alarms_;
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable arrived_;
  std::vector<std::pair<std::string, std::string>> alarms_;
};

// A step of run "r" whose layer 0 has two heads of attention entropy `entropy`.
storage::StepResult EntropyStep(int64_t step, double entropy) {
  storage::StepResult result;
  result.run = "r";
  result.probe = {"p", "probe p", 16, 64};
  result.step = step;
  result.checkpoint_path = "/ckpt/r/" + std::to_string(step);
  result.model_family = "gpt_neox";
  result.num_layers = 12;
  result.num_heads = 12;
  result.head_dim = 64;
  result.scalars = {{"attn_entropy", 0, 0, entropy}, {"attn_entropy", 0, 1, entropy}};
  return result;
}

class AlarmStepObserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::MetricsStore::Open({dir_.File("metrics.db")});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    absl::StatusOr<std::vector<AlarmRule>> rules = LoadAlarmRules("");
    ASSERT_TRUE(rules.ok()) << rules.status();
    AlarmMonitor::Options options;
    options.rules = *std::move(rules);
    monitor_ = std::make_unique<AlarmMonitor>(std::move(options), store_.get());
    observer_ = std::make_unique<AlarmStepObserver>(monitor_.get(), /*webhook=*/nullptr);
  }

  // Writes `result` as a completion does (replacing a stored step, as --force does), then
  // tells the observer.
  void StoreAndObserve(const storage::StepResult& result) {
    const absl::Status written = store_->WriteStep(result, /*replace=*/true);
    ASSERT_TRUE(written.ok()) << written;
    Observe(result);
  }

  void Observe(const storage::StepResult& result) {
    const StoredStep step{kJobId, &result, result.model_family, "cpu", 1.5};
    observer_->StepStored(step, notices_);
  }

  TestTempDir dir_;
  std::unique_ptr<storage::MetricsStore> store_;
  std::unique_ptr<AlarmMonitor> monitor_;
  std::unique_ptr<AlarmStepObserver> observer_;
  FakeNotices notices_;
};

TEST_F(AlarmStepObserverTest, HealthyStepPublishesNothing) {
  StoreAndObserve(EntropyStep(1, 3.0));
  EXPECT_TRUE(notices_.published.empty());
}

TEST_F(AlarmStepObserverTest, FiredAlarmIsPublishedOnceToTheStepsJob) {
  StoreAndObserve(EntropyStep(1, 0.1));
  ASSERT_EQ(notices_.published.size(), 1u);
  const auto& [job_id, alarm] = notices_.published[0];
  EXPECT_EQ(job_id, kJobId);
  EXPECT_GT(alarm.id(), 0);
  EXPECT_EQ(alarm.namespace_(), storage::kDefaultNamespace);
  EXPECT_EQ(alarm.run(), "r");
  EXPECT_EQ(alarm.probe_id(), "p");
  EXPECT_EQ(alarm.rule(), "attention_entropy_collapse");
  EXPECT_EQ(alarm.layer(), 0);
  EXPECT_EQ(alarm.step(), 1);
  EXPECT_EQ(alarm.state(), pb::ALARM_STATE_FIRING);
  EXPECT_EQ(alarm.severity(), "critical");

  // Still collapsed: the alarm keeps firing and is not published again.
  StoreAndObserve(EntropyStep(2, 0.1));
  EXPECT_EQ(notices_.published.size(), 1u);
}

TEST_F(AlarmStepObserverTest, ResolvedAlarmIsPublishedToTheStepsJob) {
  StoreAndObserve(EntropyStep(1, 0.1));
  ASSERT_EQ(notices_.published.size(), 1u);
  StoreAndObserve(EntropyStep(2, 3.0));
  ASSERT_EQ(notices_.published.size(), 2u);
  const auto& [job_id, alarm] = notices_.published[1];
  EXPECT_EQ(job_id, kJobId);
  EXPECT_EQ(alarm.id(), notices_.published[0].second.id());
  EXPECT_EQ(alarm.state(), pb::ALARM_STATE_RESOLVED);
  EXPECT_EQ(alarm.resolved_step(), 2);
}

// A --force re-run that finds the same alarms tells the re-run job's watchers (each alarm,
// fired again in place) and sends the webhook nothing: the receiver heard of them already.
TEST_F(AlarmStepObserverTest, ForceRerunTellsItsWatchersButNotTheWebhookAgain) {
  WebhookReceiver receiver;
  absl::StatusOr<std::unique_ptr<AlarmWebhook>> webhook = AlarmWebhook::Create({receiver.Url()});
  ASSERT_TRUE(webhook.ok()) << webhook.status();
  observer_ = std::make_unique<AlarmStepObserver>(monitor_.get(), webhook->get());
  // The collapse and the drop fire at step 2 and both resolve at step 3.
  const auto run = [&] {
    for (const auto& [step, entropy] :
         std::vector<std::pair<int64_t, double>>{{1, 3.0}, {2, 0.1}, {3, 3.0}}) {
      StoreAndObserve(EntropyStep(step, entropy));
    }
  };
  run();
  ASSERT_EQ(notices_.published.size(), 4u);
  ASSERT_EQ(receiver.WaitFor(4).size(), 4u);

  run();
  ASSERT_EQ(notices_.published.size(), 6u);
  for (size_t i = 4; i < 6; ++i) {
    const pb::Alarm& again = notices_.published[i].second;
    EXPECT_EQ(again.step(), 2);
    EXPECT_EQ(again.state(), pb::ALARM_STATE_RESOLVED);  // as stored: resolved at step 3
    EXPECT_EQ(again.resolved_step(), 3);
    EXPECT_TRUE(again.id() == notices_.published[0].second.id() ||
                again.id() == notices_.published[1].second.id());
  }

  // A new event is sent; as deliveries go in order, nothing of the re-run was queued before.
  StoreAndObserve(EntropyStep(4, 0.1));
  const std::vector<std::pair<std::string, std::string>> sent = receiver.WaitFor(6);
  ASSERT_EQ(sent.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(sent[i].first, i < 4 ? "2" : "4") << i;
    EXPECT_EQ(sent[i].second, i < 2 || i >= 4 ? "ALARM_STATE_FIRING" : "ALARM_STATE_RESOLVED") << i;
  }
}

TEST_F(AlarmStepObserverTest, StoreErrorIsOnlyLoggedAndLaterStepsAreStillChecked) {
  // Handed over without being stored: the monitor's store has no run "r" (NOT_FOUND).
  Observe(EntropyStep(1, 0.1));
  EXPECT_TRUE(notices_.published.empty());
  StoreAndObserve(EntropyStep(2, 0.1));
  ASSERT_EQ(notices_.published.size(), 1u);
  EXPECT_EQ(notices_.published[0].second.step(), 2);
}

}  // namespace
}  // namespace anisoscope::server
