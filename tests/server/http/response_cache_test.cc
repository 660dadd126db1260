#include "server/http/response_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http/http_thread_pool.h"

namespace anisoscope::server {
namespace {

using namespace std::chrono_literals;

TEST(ResponseCacheTest, AnAnswerIsKeptUntilTheVersionChanges) {
  ResponseCache cache(1 << 20);
  int computed = 0;
  const auto compute = [&]() -> absl::StatusOr<std::string> {
    return "{\"n\":" + std::to_string(++computed) + "}";
  };
  ResponseCache::Answer first = cache.GetOrCompute("k", 7, compute);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->body, "{\"n\":1}");
  EXPECT_EQ((*cache.GetOrCompute("k", 7, compute))->body, "{\"n\":1}");
  EXPECT_EQ((*cache.GetOrCompute("k", 8, compute))->body, "{\"n\":2}");
  EXPECT_EQ((*cache.GetOrCompute("other", 8, compute))->body, "{\"n\":3}");
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cache.stats().computed, 3);
  EXPECT_EQ(cache.stats().entries, 2u);
}

TEST(ResponseCacheTest, ErrorsAreNotKept) {
  ResponseCache cache(1 << 20);
  int calls = 0;
  const auto failing = [&]() -> absl::StatusOr<std::string> {
    ++calls;
    return absl::NotFoundError("no run 'r'");
  };
  EXPECT_EQ(cache.GetOrCompute("k", 1, failing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.GetOrCompute("k", 1, failing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST(ResponseCacheTest, ConcurrentMissesOfOneKeyComputeOnce) {
  ResponseCache cache(1 << 20);
  std::atomic<int> computed{0};
  const auto slow = [&]() -> absl::StatusOr<std::string> {
    ++computed;
    std::this_thread::sleep_for(100ms);
    return std::string("{\"slow\":true}");
  };
  std::vector<std::thread> callers;
  std::atomic<int> answered{0};
  for (int i = 0; i < 16; ++i) {
    callers.emplace_back([&] {
      ResponseCache::Answer answer = cache.GetOrCompute("series", 3, slow);
      if (answer.ok() && (*answer)->body == "{\"slow\":true}") ++answered;
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(answered.load(), 16);
  EXPECT_EQ(computed.load(), 1);
  EXPECT_EQ(cache.stats().shared + cache.stats().hits, 15);
}

TEST(ResponseCacheTest, LeastRecentlyUsedAnswersGoFirstPastTheBudget) {
  const std::string body(4000, 'x');
  ResponseCache cache(10000);  // room for two such answers
  const auto compute = [&]() -> absl::StatusOr<std::string> { return body; };
  ASSERT_TRUE(cache.GetOrCompute("a", 1, compute).ok());
  ASSERT_TRUE(cache.GetOrCompute("b", 1, compute).ok());
  ASSERT_TRUE(cache.GetOrCompute("a", 1, compute).ok());  // a is now the most recent
  ASSERT_TRUE(cache.GetOrCompute("c", 1, compute).ok());  // b goes
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_LE(cache.stats().bytes, 10000u);
  const int64_t computed = cache.stats().computed;
  ASSERT_TRUE(cache.GetOrCompute("a", 1, compute).ok());
  EXPECT_EQ(cache.stats().computed, computed) << "a should still be kept";
  ASSERT_TRUE(cache.GetOrCompute("b", 1, compute).ok());
  EXPECT_EQ(cache.stats().computed, computed + 1) << "b should have been dropped";
}

TEST(HttpThreadPoolTest, GrowsAThreadPerWaitingTaskUpToItsMaximum) {
  auto gauge = std::make_shared<PoolGauge>();
  HttpThreadPool pool(2, 6, /*max_queued=*/8, gauge);
  EXPECT_EQ(gauge->threads.load(), 2);
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  for (int i = 0; i < 8; ++i) {
    pool.enqueue([&] {
      ++started;
      while (!release) std::this_thread::sleep_for(1ms);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (started.load() < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(started.load(), 6) << "six held tasks should each have a thread";
  EXPECT_EQ(gauge->threads.load(), 6);
  EXPECT_EQ(gauge->waiting.load(), 2);
  release = true;
  pool.shutdown();
  EXPECT_EQ(started.load(), 8) << "shutdown runs what was queued";
  EXPECT_EQ(gauge->waiting.load(), 0);
  EXPECT_EQ(gauge->busy.load(), 0);
}

TEST(HttpThreadPoolTest, AConnectionBeyondTheQueueIsRefusedOnTheAcceptingThread) {
  auto gauge = std::make_shared<PoolGauge>();
  HttpThreadPool pool(1, 1, /*max_queued=*/1, gauge);
  std::mutex mu;
  std::condition_variable released_cv;
  bool released = false;
  std::atomic<int> ran{0};
  const auto hold = [&] {
    std::unique_lock<std::mutex> lock(mu);
    released_cv.wait(lock, [&] { return released; });
    ran.fetch_add(1);
  };
  pool.enqueue(hold);  // the one thread
  pool.enqueue(hold);  // the one place in the queue
  bool refused_here = false;
  pool.enqueue([&] { refused_here = HttpThreadPool::Refusing(); });
  EXPECT_TRUE(refused_here) << "run at once, on this thread, told it is refused";
  EXPECT_FALSE(HttpThreadPool::Refusing());
  EXPECT_EQ(gauge->refused.load(), 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  released_cv.notify_all();
  pool.shutdown();
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace anisoscope::server
