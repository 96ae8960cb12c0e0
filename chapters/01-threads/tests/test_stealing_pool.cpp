// Tests of the work-stealing pool's contract (include/concurdl/threads/stealing_pool.hpp): every
// task runs exactly once at 1, 2, 4 and 8 threads, whether posted from outside, from many
// outside threads at once, or from tasks (then stolen); wait_all() runs tasks on the caller and
// rethrows a posted task's exception once; futures carry results and exceptions; the destructor
// drops nothing, even tasks posted while it drains. Each test runs under a watchdog.
// Typed: the pool with its spinning lane lock (StealingPool) and with std::mutex lanes.
//   ch01_tests --gtest_filter='StealingPool*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/threads/stealing_pool.hpp"

namespace {

using concurdl::testing::within_seconds;
using concurdl::threads::BasicStealingPool;
using concurdl::threads::LaneLock;
using namespace std::chrono_literals;

constexpr unsigned kThreadCounts[] = {1, 2, 4, 8};
constexpr int kWatchdogSeconds = 60;

template <class Pool>
class StealingPool : public ::testing::Test {};
struct PoolNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, BasicStealingPool<LaneLock>> ? "lane_lock" : "mutex";
  }
};
using PoolTypes = ::testing::Types<BasicStealingPool<LaneLock>, BasicStealingPool<std::mutex>>;
TYPED_TEST_SUITE(StealingPool, PoolTypes, PoolNames);

// Index of the first count that is not 1, or -1; and how many are wrong.
std::pair<long, std::size_t> first_miscount(const std::vector<std::atomic<int>>& hits) {
  long first = -1;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < hits.size(); ++i)
    if (hits[i].load() != 1 && wrong++ == 0) first = static_cast<long>(i);
  return {first, wrong};
}

TYPED_TEST(StealingPool, RunsEveryPostedTaskExactlyOnce) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      constexpr std::size_t kTasks = 100'000;
      std::vector<std::atomic<int>> hits(kTasks);
      TypeParam pool(threads);
      EXPECT_EQ(pool.size(), threads);
      for (std::size_t i = 0; i < kTasks; ++i) pool.post([&hits, i] { hits[i].fetch_add(1); });
      pool.wait_all();
      const auto [first, wrong] = first_miscount(hits);
      EXPECT_EQ(wrong, 0u) << "first task not run exactly once: " << first;
      // The pool is reusable: a second batch after wait_all().
      for (std::size_t i = 0; i < kTasks; ++i) pool.post([&hits, i] { hits[i].fetch_add(1); });
      pool.wait_all();
      std::size_t not_two = 0;
      for (auto& h : hits) not_two += h.load() != 2;
      EXPECT_EQ(not_two, 0u);
    }
  });
}

// Several outside threads post at once (all to lane 0) while the workers steal from it.
TYPED_TEST(StealingPool, ConcurrentPostersLoseNothing) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      constexpr int kPosters = 4, kEach = 20'000;
      std::vector<std::atomic<int>> hits(kPosters * kEach);
      TypeParam pool(threads);
      {
        std::vector<std::jthread> posters;
        for (int p = 0; p < kPosters; ++p)
          posters.emplace_back([&, p] {
            for (int i = 0; i < kEach; ++i)
              pool.post(
                  [&hits, k = p * kEach + i] { hits[static_cast<std::size_t>(k)].fetch_add(1); });
          });
      }
      pool.wait_all();
      EXPECT_EQ(first_miscount(hits).second, 0u);
    }
  });
}

// A binary tree of tasks: each inner node posts its two children to its own lane, so the work
// starts on one thread and spreads only by stealing; the leaves sleep a little so that wait_all()
// is reached long before the tree is done.
template <class Pool>
void grow(Pool& pool, std::atomic<int>& leaves, int depth) {
  if (depth == 0) {
    std::this_thread::sleep_for(20us);
    leaves.fetch_add(1);
    return;
  }
  pool.post([&pool, &leaves, depth] { grow(pool, leaves, depth - 1); });
  pool.post([&pool, &leaves, depth] { grow(pool, leaves, depth - 1); });
}

TYPED_TEST(StealingPool, WaitAllWaitsForTasksPostedByTasks) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      std::atomic<int> leaves{0};
      TypeParam pool(threads);
      pool.post([&] { grow(pool, leaves, 11); });
      pool.wait_all();
      EXPECT_EQ(leaves.load(), 1 << 11);
    }
  });
}

// With more than one thread the tree's work must really be spread: a pool whose workers never
// stole would run every leaf on the thread that posted the root. Each leaf waits (up to one
// shared deadline, yielding) until leaves have run on two threads, so that the thread running
// the first leaves holds on until another has stolen some, however the threads are scheduled;
// without stealing the first leaf waits out the deadline and the count below stays at 1.
TYPED_TEST(StealingPool, IdleThreadsStealWork) {
  within_seconds(kWatchdogSeconds, [] {
    TypeParam pool(4);
    std::mutex mu;
    std::set<std::thread::id> ran_on;
    std::atomic<int> leaves{0};
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    std::function<void(int)> node = [&](int depth) {
      if (depth == 0) {
        std::size_t threads_seen = 0;
        {
          std::lock_guard lock(mu);
          ran_on.insert(std::this_thread::get_id());
          threads_seen = ran_on.size();
        }
        while (threads_seen < 2 && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::yield();
          std::lock_guard lock(mu);
          threads_seen = ran_on.size();
        }
        leaves.fetch_add(1);
        return;
      }
      pool.post([&, depth] { node(depth - 1); });
      pool.post([&, depth] { node(depth - 1); });
    };
    pool.post([&] { node(8); });
    pool.wait_all();
    EXPECT_EQ(leaves.load(), 256);
    EXPECT_GE(ran_on.size(), 2u) << "every leaf ran on one thread for 10 s: nothing was stolen";
  });
}

TYPED_TEST(StealingPool, WaitAllRethrowsAPostedTasksExceptionOnce) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      TypeParam pool(threads);
      std::atomic<int> ran{0};
      for (int i = 0; i < 1000; ++i)
        pool.post([&ran, i] {
          ran.fetch_add(1);
          if (i == 500) throw std::runtime_error("task 500 failed");
        });
      try {
        pool.wait_all();
        ADD_FAILURE() << "wait_all() did not rethrow";
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "task 500 failed");
      }
      EXPECT_EQ(ran.load(), 1000) << "one task's exception stopped others";
      EXPECT_NO_THROW(pool.wait_all()) << "the exception was rethrown twice";
      // Still usable after a failure.
      pool.post([&ran] { ran.fetch_add(1); });
      pool.wait_all();
      EXPECT_EQ(ran.load(), 1001);
    }
  });
}

TYPED_TEST(StealingPool, FuturesCarryResultsAndExceptions) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      TypeParam pool(threads);
      std::vector<std::future<std::int64_t>> squares;
      for (std::int64_t i = 0; i < 1000; ++i) squares.push_back(pool.submit([i] { return i * i; }));
      auto bad = pool.submit([]() -> int { throw std::logic_error("bad task"); });
      pool.wait_all();  // with one thread, tasks run only here
      for (std::int64_t i = 0; i < 1000; ++i)
        EXPECT_EQ(squares[static_cast<std::size_t>(i)].get(), i * i);
      EXPECT_THROW(bad.get(), std::logic_error);
      EXPECT_NO_THROW(pool.wait_all()) << "a submitted task's exception belongs to its future";
    }
  });
}

TYPED_TEST(StealingPool, OneThreadRunsTasksOnTheWaitingCaller) {
  within_seconds(kWatchdogSeconds, [] {
    TypeParam pool(1);
    std::atomic<int> elsewhere{0};
    const auto me = std::this_thread::get_id();
    for (int i = 0; i < 100; ++i)
      pool.post([&elsewhere, me] { elsewhere += std::this_thread::get_id() != me; });
    pool.wait_all();
    EXPECT_EQ(elsewhere.load(), 0);
  });
}

// The destructor runs everything queued, including tasks posted by tasks while it drains.
TYPED_TEST(StealingPool, DestructorDropsNothing) {
  within_seconds(kWatchdogSeconds, [] {
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      std::atomic<int> ran{0};
      {
        TypeParam pool(threads);
        for (int i = 0; i < 10'000; ++i)
          pool.post([&pool, &ran] {
            ran.fetch_add(1);
            pool.post([&ran] { ran.fetch_add(1); });
          });
      }
      EXPECT_EQ(ran.load(), 20'000);
    }
  });
}

TYPED_TEST(StealingPool, RejectsZeroThreads) { EXPECT_THROW(TypeParam(0), std::invalid_argument); }

}  // namespace
