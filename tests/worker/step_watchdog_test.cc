// StepWatchdog: the deadline of a step, --step-timeout or derived from the step's own rate.
#include "worker/step_watchdog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace anisoscope::worker {
namespace {

TEST(StepDeadlineTest, BeforeTheFirstBatchTheFloorPlusASlowReadOfTheCheckpoint) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(StepDeadline(start, 0, start, 0, 0), start + kStepFloor);
  // 2 GB at 20 MB/s: 100 s more.
  EXPECT_EQ(StepDeadline(start, 2'000'000'000, start + absl::Seconds(50), 0, 10),
            start + kStepFloor + absl::Seconds(100));
}

TEST(StepDeadlineTest, AfterABatchFourTimesTheLengthItsRateProjects) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  // One batch of 10 done in 60 s: 600 s projected, 2400 s allowed.
  EXPECT_EQ(StepDeadline(start, 0, start + absl::Seconds(60), 1, 10),
            start + absl::Seconds(2400));
  // A fast step keeps the floor.
  EXPECT_EQ(StepDeadline(start, 0, start + absl::Seconds(1), 1, 10), start + kStepFloor);
}

struct Expiry {
  absl::Notification fired;
  std::string why;
  StepWatchdog::Expired callback() {
    return [this](const std::string& reason) {
      why = reason;
      fired.Notify();
    };
  }
};

TEST(StepWatchdogTest, AStepPastStepTimeoutIsAbandonedNamingTheFlag) {
  Expiry expiry;
  StepWatchdog watchdog(0.3, expiry.callback());
  watchdog.Start(0);
  ASSERT_TRUE(expiry.fired.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_THAT(expiry.why, ::testing::HasSubstr("--step-timeout (0.3 s)"));
  EXPECT_THAT(expiry.why, ::testing::HasSubstr("raise --step-timeout"));
}

TEST(StepWatchdogTest, AFinishedStepIsNeverAbandoned) {
  Expiry expiry;
  StepWatchdog watchdog(0.3, expiry.callback());
  watchdog.Start(0);
  watchdog.Finish();
  EXPECT_EQ(watchdog.deadline(), absl::InfiniteFuture());
  EXPECT_FALSE(expiry.fired.WaitForNotificationWithTimeout(absl::Seconds(0.8)));
}

TEST(StepWatchdogTest, ADerivedDeadlineFollowsTheMeasuredRate) {
  Expiry expiry;
  StepWatchdog watchdog(0, expiry.callback());
  watchdog.Start(0);
  const absl::Time before = watchdog.deadline();
  absl::SleepFor(absl::Milliseconds(50));
  watchdog.Progress(1, 1'000'000);  // a million batches at this rate: far beyond the floor
  EXPECT_GT(watchdog.deadline(), before);
  watchdog.Finish();
}

}  // namespace
}  // namespace anisoscope::worker
