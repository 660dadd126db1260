// LeaseTable (server/jobs/lease_table.h): the job runner's leases as a plain value, tested
// directly: who holds what, the cancelled ring, the per-worker cap, expiry and deadlines.
#include "server/jobs/lease_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace anisoscope::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

LeaseEntry Held(int64_t job, size_t index, const std::string& holder,
                absl::Time deadline = absl::InfiniteFuture()) {
  LeaseEntry entry;
  entry.key = {job, index};
  entry.holder = holder;
  entry.deadline = deadline;
  return entry;
}

TEST(LeaseTableTest, AddedLeaseIsFoundUntilRemoved) {
  LeaseTable table(4);
  LeaseEntry& added = table.Add("l1", Held(7, 2, "alice"));
  EXPECT_EQ(added.key, StepKey(7, 2));
  EXPECT_EQ(table.size(), 1u);
  LeaseEntry* found = table.Find("l1");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found, &added);
  EXPECT_EQ(found->holder, "alice");
  EXPECT_EQ(table.Find("l2"), nullptr);

  found->batches_done = 3;
  const LeaseEntry removed = table.Remove("l1");
  EXPECT_EQ(removed.key, StepKey(7, 2));
  EXPECT_EQ(removed.batches_done, 3);
  EXPECT_EQ(table.Find("l1"), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

TEST(LeaseTableTest, FindHeldByAnUnknownLeaseIsFailedPreconditionNamingIt) {
  LeaseTable table(4);
  bool adopted = true;
  const absl::StatusOr<LeaseEntry*> lease = table.FindHeldBy("gone-lease", "alice", &adopted);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(lease.status().message()), HasSubstr("'gone-lease'"));
  EXPECT_FALSE(adopted);
}

TEST(LeaseTableTest, FindHeldByAnotherIdentityIsPermissionDenied) {
  LeaseTable table(4);
  table.Add("l1", Held(1, 0, "alice"));
  bool adopted = true;
  const absl::StatusOr<LeaseEntry*> lease = table.FindHeldBy("l1", "mallory", &adopted);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(adopted);
  EXPECT_EQ(table.Find("l1")->holder, "alice");

  const absl::StatusOr<LeaseEntry*> own = table.FindHeldBy("l1", "alice", &adopted);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own, table.Find("l1"));
  EXPECT_FALSE(adopted);
}

TEST(LeaseTableTest, LeaseWithNoHolderIsAdoptedByTheFirstCaller) {
  LeaseTable table(4);
  table.Add("l1", Held(1, 0, ""));
  bool adopted = false;
  const absl::StatusOr<LeaseEntry*> lease = table.FindHeldBy("l1", "bob", &adopted);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(adopted);
  EXPECT_EQ((*lease)->holder, "bob");
  // Now bob's: another identity is refused, bob is not adopted again.
  EXPECT_EQ(table.FindHeldBy("l1", "carol", &adopted).status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(table.FindHeldBy("l1", "bob", &adopted).ok());
  EXPECT_FALSE(adopted);
}

TEST(LeaseTableTest, CancelledRingForgetsTheOldestPastItsBound) {
  LeaseTable table(4, /*cancelled_kept=*/2);
  EXPECT_FALSE(table.WasCancelled("a"));
  table.MarkCancelled("a");
  table.MarkCancelled("b");
  EXPECT_TRUE(table.WasCancelled("a"));
  EXPECT_TRUE(table.WasCancelled("b"));
  table.MarkCancelled("c");
  EXPECT_FALSE(table.WasCancelled("a"));
  EXPECT_TRUE(table.WasCancelled("b"));
  EXPECT_TRUE(table.WasCancelled("c"));
}

TEST(LeaseTableTest, MarkingACancelledLeaseAgainTakesNoSecondPlaceInTheRing) {
  LeaseTable table(4, /*cancelled_kept=*/2);
  table.MarkCancelled("a");
  table.MarkCancelled("a");
  table.MarkCancelled("b");
  // Two distinct ids fit: had "a" taken two places, "b" would have pushed it out.
  EXPECT_TRUE(table.WasCancelled("a"));
  EXPECT_TRUE(table.WasCancelled("b"));
  table.MarkCancelled("c");
  EXPECT_FALSE(table.WasCancelled("a"));
  EXPECT_TRUE(table.WasCancelled("b"));
  EXPECT_TRUE(table.WasCancelled("c"));
}

TEST(LeaseTableTest, CapCountsRemoteLeasesAndWaitsOfOneIdentityOnly) {
  LeaseTable table(/*max_per_worker=*/2);
  LeaseEntry local = Held(1, 0, "alice");
  local.local = true;
  table.Add("local1", local);
  table.Add("local2", local);
  table.Add("bob1", Held(1, 1, "bob"));
  table.Add("bob2", Held(1, 2, "bob"));
  // Local leases are not counted; other identities' leases are not alice's.
  EXPECT_TRUE(table.CheckCap("alice", 0).ok());
  EXPECT_TRUE(table.CheckCap("alice", 1).ok());

  table.Add("alice1", Held(1, 3, "alice"));
  EXPECT_TRUE(table.CheckCap("alice", 0).ok());
  // One held and one waiting: as many as the cap.
  const absl::Status full = table.CheckCap("alice", 1);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("--max-leases-per-worker"));
  EXPECT_THAT(std::string(full.message()), HasSubstr("'alice'"));
  // Waiting alone counts.
  EXPECT_EQ(table.CheckCap("carol", 2).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table.CheckCap("bob", 0).code(), absl::StatusCode::kResourceExhausted);
}

TEST(LeaseTableTest, IdleLeasesOfAJobSkipBusyLeasesAndOtherJobs) {
  LeaseTable table(8);
  table.Add("idle", Held(1, 0, "a"));
  LeaseEntry storing = Held(1, 1, "a");
  storing.storing = true;
  table.Add("storing", storing);
  LeaseEntry completing = Held(1, 2, "a");
  completing.completing = true;
  table.Add("completing", completing);
  table.Add("other-job", Held(2, 0, "a"));
  EXPECT_THAT(table.IdleLeasesOf(1), ElementsAre("idle"));
  EXPECT_THAT(table.IdleLeasesOf(2), ElementsAre("other-job"));
  EXPECT_THAT(table.IdleLeasesOf(3), IsEmpty());
}

TEST(LeaseTableTest, ExpiredAreThoseAtOrPastTheirDeadlineAndNotBusy) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  LeaseTable table(8);
  table.Add("past", Held(1, 0, "a", now - absl::Seconds(1)));
  table.Add("now", Held(1, 1, "a", now));
  table.Add("future", Held(1, 2, "a", now + absl::Seconds(1)));
  LeaseEntry storing = Held(1, 3, "a", now - absl::Seconds(5));
  storing.storing = true;
  table.Add("storing", storing);
  LeaseEntry completing = Held(1, 4, "a", now - absl::Seconds(5));
  completing.completing = true;
  table.Add("completing", completing);
  EXPECT_THAT(table.Expired(now), UnorderedElementsAre("past", "now"));
}

TEST(LeaseTableTest, NextDeadlineIsTheEarliestAndInfiniteWhenEmpty) {
  LeaseTable table(8);
  EXPECT_EQ(table.NextDeadline(), absl::InfiniteFuture());
  const absl::Time t = absl::FromUnixSeconds(5000);
  table.Add("later", Held(1, 0, "a", t + absl::Seconds(30)));
  table.Add("sooner", Held(1, 1, "a", t));
  table.Add("never", Held(1, 2, "a"));
  EXPECT_EQ(table.NextDeadline(), t);
  table.Remove("sooner");
  EXPECT_EQ(table.NextDeadline(), t + absl::Seconds(30));
  table.Remove("later");
  table.Remove("never");
  EXPECT_EQ(table.NextDeadline(), absl::InfiniteFuture());
}

}  // namespace
}  // namespace anisoscope::server
