// What dead writers leave is cleaned: their `.incomplete` downloads, their lock, their lock's
// temporary file, their reservations. A live owner's are kept, and a lock held by a live
// process times out with an error naming the holder.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sources/cache/node_lock.h"
#include "sources/cache/process_owner.h"
#include "tests/common/test_temp_dir.h"
#include "tests/sources/cache/cache_test_util.h"

namespace anisoscope::cache {
namespace {

// The owner token of a process that has exited and been reaped.
std::string DeadOwnerToken() {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string token = ProcessOwner::Self().Token();
    (void)!write(fds[1], token.data(), token.size());
    _exit(0);
  }
  close(fds[1]);
  char buffer[256] = {};
  const ssize_t got = read(fds[0], buffer, sizeof(buffer) - 1);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return std::string(buffer, got > 0 ? static_cast<size_t>(got) : 0);
}

std::filesystem::path State(const TestTempDir& temp) {
  return temp.path() / ".locks" / "anisoscope";
}

TEST(SourceCacheStaleFiles, DeadOrOldIncompleteFilesAreSweptOnOpen) {
  TestTempDir temp;
  const std::filesystem::path blobs = temp.path() / "models--org--m" / "blobs";
  std::filesystem::create_directories(blobs);
  const std::string dead = DeadOwnerToken();
  ASSERT_FALSE(dead.empty());
  ASSERT_FALSE(ProcessOwner::Parse(dead)->MaybeAlive());
  const std::string etag = testing::FakeSha256("w");
  const auto make = [&](const std::string& name, absl::Duration age) {
    std::ofstream(blobs / name) << "partial";
    testing::SetMtime(blobs / name, absl::Now() - age);
    return blobs / name;
  };
  const auto dead_writer =
      make(absl::StrCat(etag, ".", dead, ".00ff.incomplete"), absl::ZeroDuration());
  const auto live_writer =
      make(absl::StrCat(etag, ".", ProcessOwner::Self().Token(), ".00ff.incomplete"),
           absl::ZeroDuration());
  // huggingface_hub's own naming, "<etag>.<uuid8>.incomplete": only age tells.
  const auto old_foreign = make(etag + ".1a2b3c4d.incomplete", absl::Hours(2));
  const auto fresh_foreign = make(etag + ".5e6f7a8b.incomplete", absl::Minutes(1));

  SourceCacheOptions options{temp.path(), 1 << 20};
  options.stale_after = absl::Hours(1);
  ASSERT_TRUE(SourceCache::Create(options).ok());
  EXPECT_FALSE(std::filesystem::exists(dead_writer));
  EXPECT_TRUE(std::filesystem::exists(live_writer));
  EXPECT_FALSE(std::filesystem::exists(old_foreign));
  EXPECT_TRUE(std::filesystem::exists(fresh_foreign));
}

TEST(SourceCacheStaleFiles, LockOfADeadWorkerIsBrokenAtOnce) {
  TestTempDir temp;
  ASSERT_TRUE(SourceCache::Create({temp.path(), 1 << 20}).ok());
  const std::filesystem::path lock = State(temp) / "lock";
  const pid_t pid = fork();
  if (pid == 0) {
    NodeLock held(lock, absl::Hours(1), absl::Seconds(5));
    _exit(held.Lock().ok() ? 0 : 1);  // dies holding it
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(std::filesystem::exists(lock));
  // And a temporary file of a writer that died before linking it.
  const std::filesystem::path temp_file = State(temp) / "lock.00ff00ff00ff00ff.tmp";
  std::ofstream(temp_file) << DeadOwnerToken() << " 1234";

  const auto began = std::chrono::steady_clock::now();
  SourceCacheOptions options{temp.path(), 1 << 20};
  options.lock_timeout = absl::Seconds(5);
  auto cache = SourceCache::Create(options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(2));
  EXPECT_FALSE(std::filesystem::exists(lock));  // broken, then taken and released by us
  EXPECT_FALSE(std::filesystem::exists(temp_file));
  EXPECT_FALSE(std::filesystem::exists(State(temp) / "lock.break"));
}

TEST(SourceCacheStaleFiles, LiveLockTimesOutNamingItsHolder) {
  TestTempDir temp;
  const std::filesystem::path lock = temp.path() / "lock";
  NodeLock first(lock, absl::Hours(1), absl::Seconds(1));
  ASSERT_TRUE(first.Lock().ok());
  NodeLock second(lock, absl::Hours(1), absl::Milliseconds(50));
  const absl::Status status = second.Lock();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), ProcessOwner::Self().Token())) << status;
  first.Unlock();
  EXPECT_TRUE(second.Lock().ok());
}

TEST(SourceCacheStaleFiles, LockOfAnotherHostIsBrokenOnlyOnceOld) {
  TestTempDir temp;
  const std::filesystem::path lock = temp.path() / "lock";
  std::ofstream(lock) << "another-host~4242~1 0123";
  NodeLock mine(lock, absl::Hours(1), absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsUnavailable(mine.Lock()));  // cannot tell whether it lives: wait
  testing::SetMtime(lock, absl::Now() - absl::Hours(2));
  EXPECT_TRUE(mine.Lock().ok());
}

TEST(SourceCacheStaleFiles, ReservationsAndPinsOfDeadWorkersStopCounting) {
  TestTempDir temp;
  auto cache = SourceCache::Create({temp.path(), 1 << 20}).value();
  const std::string dead = DeadOwnerToken();
  const auto reservation = State(temp) / "reservations" / (dead + ".0011");
  const auto pin = State(temp) / "pins" / (dead + ".0022");
  std::ofstream(reservation) << "5000 models--org--m/" << testing::FakeCommit("a") << "\n";
  std::ofstream(pin) << "models--org--m/" << testing::FakeCommit("a") << "\n";
  const auto live = State(temp) / "reservations" / (ProcessOwner::Self().Token() + ".0033");
  std::ofstream(live) << "700 models--org--m/" << testing::FakeCommit("b") << "\n";
  EXPECT_EQ(cache->Refresh().value().bytes_reserved, 700u);
  EXPECT_FALSE(std::filesystem::exists(reservation));
  EXPECT_FALSE(std::filesystem::exists(pin));
  EXPECT_TRUE(std::filesystem::exists(live));
}

}  // namespace
}  // namespace anisoscope::cache
