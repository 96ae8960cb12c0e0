// Tests of the thread pool contract (include/concurdl/threads/thread_pool.hpp), run over the
// reference ThreadPool and the student's StudentPool (exercise 1.3) alike: every task runs
// exactly once, results and exceptions come back through futures, wait_all() waits for nested
// tasks too, the destructor drops nothing and never hangs, submit after shutdown throws.
// Every scenario runs at 1, 2, 4 and 8 workers (more workers than cores finds other bugs) and
// under a watchdog, so a deadlock fails the test instead of hanging the binary.
//   ch01_tests --gtest_filter='Pool*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../exercises/student_pool.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/threads/thread_pool.hpp"

namespace {

using concurdl::threads::StudentPool;
using concurdl::threads::ThreadPool;
using namespace std::chrono_literals;

constexpr unsigned kWorkerCounts[] = {1, 2, 4, 8};
// Generous: a scenario takes well under a second here, and sanitizer builds are ~10x slower.
// The ctest timeout (120 s) is the last line of defence.
constexpr std::chrono::seconds kDeadline = 60s;

// Runs `scenario` on a detached thread and waits at most `limit`. A deadlock becomes a failed
// test instead of a stuck binary. The scenario must own everything it touches (its own locals,
// with the pool declared last so that it is destroyed first, or captures by value), so a thread
// left hanging touches nothing of the test's stack. An exception thrown by the scenario is rethrown
// here, on the test's thread, so a stub's NotImplemented becomes a skip through CDL_TRY_EXERCISE.
[[nodiscard]] ::testing::AssertionResult finishes_within(std::chrono::seconds limit,
                                                         std::function<void()> scenario) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([done, scenario = std::move(scenario)]() mutable {
    try {
      scenario();
      scenario = nullptr;  // release what it owns before the test goes on
      done->set_value();
    } catch (...) {
      scenario = nullptr;
      done->set_exception(std::current_exception());
    }
  }).detach();
  if (finished.wait_for(limit) != std::future_status::ready)
    return ::testing::AssertionFailure()
           << "did not finish within " << limit.count()
           << " s: a deadlock or a lost wake-up (the scenario's thread is left behind)";
  finished.get();
  return ::testing::AssertionSuccess();
}

// How many of `hits` are not exactly 1, and the first such index (for the message).
struct Miscount {
  std::size_t wrong = 0, first = 0;
  int first_value = 1;
};
Miscount miscount(const std::vector<std::atomic<int>>& hits) {
  Miscount m;
  for (std::size_t i = 0; i < hits.size(); ++i) {
    const int v = hits[i].load();
    if (v != 1 && m.wrong++ == 0) {
      m.first = i;
      m.first_value = v;
    }
  }
  return m;
}

template <class Pool>
class PoolTyped : public ::testing::Test {};

struct PoolNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, ThreadPool> ? "reference" : "student";
  }
};

using Pools = ::testing::Types<ThreadPool, StudentPool>;
TYPED_TEST_SUITE(PoolTyped, Pools, PoolNames);

TYPED_TEST(PoolTyped, RejectsZeroWorkersAndReportsSize) {
  EXPECT_THROW(TypeParam pool(0), std::invalid_argument);
  for (unsigned w : kWorkerCounts) EXPECT_EQ(TypeParam(w).size(), w);
}

// Conservation: 100 000 tasks, each counted in its own slot, so a task lost (0), run twice (2)
// or a count that only adds up by accident shows.
TYPED_TEST(PoolTyped, EveryTaskRunsExactlyOnce) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      constexpr std::size_t n = 100'000;
      std::vector<std::atomic<int>> hits(n);
      std::atomic<std::int64_t> total{0};
      TypeParam pool(workers);  // declared last, destroyed first: no task outlives hits
      for (std::size_t i = 0; i < n; ++i)
        pool.submit([&hits, &total, i] {  // future discarded: wait_all() is the completion signal
          hits[i].fetch_add(1, std::memory_order_relaxed);
          total.fetch_add(1, std::memory_order_relaxed);
        });
      pool.wait_all();
      // Read before the destructor runs: wait_all() alone must guarantee completion.
      const Miscount m = miscount(hits);
      EXPECT_EQ(m.wrong, 0u) << "task " << m.first << " ran " << m.first_value << " times";
      EXPECT_EQ(total.load(), static_cast<std::int64_t>(n));
    })));
  }
}

TYPED_TEST(PoolTyped, FuturesCarryResults) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      TypeParam pool(workers);
      constexpr std::int64_t n = 10'000;
      std::vector<std::future<std::int64_t>> squares;
      squares.reserve(n);
      for (std::int64_t i = 0; i < n; ++i)
        squares.push_back(pool.submit([i] { return i * i + 1; }));
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < n; ++i) wrong += squares[i].get() != i * i + 1;
      EXPECT_EQ(wrong, 0) << "futures returned the wrong value";

      auto ran = std::make_shared<std::atomic<int>>(0);
      std::future<void> done = pool.submit([ran] { ran->fetch_add(1); });
      done.get();  // a void task's future says "finished"
      EXPECT_EQ(ran->load(), 1);

      // A move-only callable (the contract takes any callable; std::function alone would not).
      auto boxed = std::make_unique<int>(42);
      std::future<int> unboxed = pool.submit([b = std::move(boxed)] { return *b; });
      EXPECT_EQ(unboxed.get(), 42);
    })));
  }
}

TYPED_TEST(PoolTyped, ExceptionReachesCallerAndPoolKeepsWorking) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      TypeParam pool(workers);
      constexpr int n = 3'000;
      std::vector<std::future<int>> results;
      for (int i = 0; i < n; ++i)
        results.push_back(pool.submit([i]() -> int {
          if (i % 3 == 0) throw std::runtime_error("task " + std::to_string(i) + " failed");
          return i;
        }));
      int caught = 0, wrong = 0;
      for (int i = 0; i < n; ++i) {
        try {
          wrong += results[i].get() != i || i % 3 == 0;
        } catch (const std::runtime_error& e) {
          ++caught;
          wrong += i % 3 != 0 || std::string(e.what()) != "task " + std::to_string(i) + " failed";
        }
      }
      EXPECT_EQ(caught, n / 3) << "every failing task's exception must reach its future";
      EXPECT_EQ(wrong, 0) << "a result or an exception reached the wrong future";

      // Any exception type travels, not only std::exception.
      std::future<void> odd = pool.submit([] { throw 7; });
      EXPECT_THROW(odd.get(), int);

      // The workers survived: the pool still runs tasks and wait_all() still returns.
      auto after = std::make_shared<std::atomic<int>>(0);
      for (int i = 0; i < 1000; ++i) pool.submit([after] { after->fetch_add(1); });
      pool.wait_all();
      EXPECT_EQ(after->load(), 1000);
    })));
  }
}

// A pool of W workers runs W tasks at the same time, on W threads that are not the caller's:
// W tasks each wait (up to a deadline, yielding) until all W have arrived. A pool that runs
// tasks inline in submit(), or on fewer threads than it claims, fails here instead of hanging.
TYPED_TEST(PoolTyped, AllWorkersRunConcurrently) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      std::atomic<unsigned> arrived{0};
      TypeParam pool(workers);
      // Each task returns how many tasks it saw running at once, and its thread.
      std::vector<std::future<std::pair<unsigned, std::thread::id>>> met;
      // One deadline for all: a task that starts late does not extend the wait.
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      for (unsigned w = 0; w < workers; ++w)
        met.push_back(pool.submit([&arrived, workers, give_up] {
          arrived.fetch_add(1);
          while (arrived.load() < workers && std::chrono::steady_clock::now() < give_up)
            std::this_thread::yield();
          return std::pair{arrived.load(), std::this_thread::get_id()};
        }));
      std::vector<std::thread::id> ids;
      for (auto& m : met) {
        const auto [seen, id] = m.get();
        EXPECT_GE(seen, workers) << "a task waited 10 s and saw only " << seen << " of " << workers
                                 << " tasks running at once";
        EXPECT_NE(id, std::this_thread::get_id()) << "a task ran on the submitting thread";
        ids.push_back(id);
      }
      std::sort(ids.begin(), ids.end());
      EXPECT_EQ(std::unique(ids.begin(), ids.end()) - ids.begin(), static_cast<long>(workers))
          << "the tasks did not run on distinct worker threads";
    })));
  }
}

// Tasks that submit tasks: each node of a binary tree of depth 10 submits its two children
// before it finishes, so the pool is never idle until the whole tree is done. wait_all() is
// called while the root is running and the queue is empty, and the leaves sleep: a wait_all()
// that returned on an empty queue (instead of nothing queued or running) sees a short count.
template <class Pool>
void spawn_tree(Pool& pool, std::atomic<int>& count, int depth) {
  if (depth == 0) {
    std::this_thread::sleep_for(100us);
  } else {
    for (int child = 0; child < 2; ++child)
      pool.submit([&pool, &count, depth] { spawn_tree(pool, count, depth - 1); });
  }
  count.fetch_add(1);
}

TYPED_TEST(PoolTyped, WaitAllWaitsForTasksSubmittedByTasks) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      std::atomic<int> count{0};  // declared before the pool: outlives every task
      TypeParam pool(workers);
      pool.wait_all();  // nothing submitted: returns at once
      constexpr int depth = 10;
      std::atomic<bool> root_started{false};
      pool.submit([&pool, &count, &root_started] {
        root_started = true;
        std::this_thread::sleep_for(10ms);  // the caller reaches wait_all() meanwhile
        spawn_tree(pool, count, depth);
      });
      while (!root_started) std::this_thread::yield();
      pool.wait_all();
      EXPECT_EQ(count.load(), (1 << (depth + 1)) - 1);
      pool.wait_all();  // and again, idle
    })));
  }
}

// Several threads submit to one pool at once and each waits: submit must be safe to call
// concurrently, and each caller's wait_all() covers its own tasks.
TYPED_TEST(PoolTyped, ConcurrentSubmittersEachWait) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      constexpr int producers = 4, per_producer = 5'000;
      std::vector<std::atomic<int>> done(producers);
      std::vector<std::atomic<int>> seen_after_wait(producers);
      TypeParam pool(workers);
      std::vector<std::future<void>> producer_threads;  // futures carry a stub's exception
      for (int p = 0; p < producers; ++p)
        producer_threads.push_back(std::async(std::launch::async, [&, p] {
          for (int i = 0; i < per_producer; ++i) pool.submit([&done, p] { done[p].fetch_add(1); });
          pool.wait_all();
          seen_after_wait[p] = done[p].load();
        }));
      for (auto& t : producer_threads) t.get();
      for (int p = 0; p < producers; ++p)
        EXPECT_EQ(seen_after_wait[p].load(), per_producer) << "producer " << p;
    })));
  }
}

// The destructor finishes every queued task: the workers are held at a gate while 10 000 tasks
// queue up, the gate opens and the pool is destroyed at once, with nearly all of them queued.
TYPED_TEST(PoolTyped, DestructorRunsEveryQueuedTask) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      constexpr std::size_t n = 10'000;
      std::vector<std::atomic<int>> hits(n);
      {
        TypeParam pool(workers);
        // After the pool: if anything below throws, the promise dies first, its future becomes
        // ready (broken_promise) and the held workers are released before ~Pool joins them.
        std::promise<void> gate;
        std::shared_future<void> opened = gate.get_future().share();
        for (unsigned w = 0; w < workers; ++w) pool.submit([opened] { opened.wait(); });
        for (std::size_t i = 0; i < n; ++i) pool.submit([&hits, i] { hits[i].fetch_add(1); });
        gate.set_value();
      }  // ~Pool here, no wait_all()
      const Miscount m = miscount(hits);
      EXPECT_EQ(m.wrong, 0u) << "task " << m.first << " ran " << m.first_value
                             << " times: the destructor dropped or repeated queued tasks";
    })));
  }
}

// Creating and destroying pools, idle or with one task, in a tight loop: a shutdown that can
// miss its wake-up (stopping_ set without the lock, notify before the worker waits) hangs here.
TYPED_TEST(PoolTyped, ShutdownNeverHangs) {
  for (unsigned workers : kWorkerCounts) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      for (int round = 0; round < 50; ++round) {
        TypeParam idle(workers);
      }
      auto ran = std::make_shared<std::atomic<int>>(0);
      for (int round = 0; round < 50; ++round) {
        TypeParam busy(workers);
        busy.submit([ran] { ran->fetch_add(1); });
      }
      EXPECT_EQ(ran->load(), 50);
    })));
  }
}

// submit() after destruction has begun throws std::runtime_error. The only code that can call
// submit then is a task still running during the destructor: this one keeps submitting no-ops
// until a submit throws. Every no-op that was accepted must still run (queued before shutdown).
TYPED_TEST(PoolTyped, SubmitDuringShutdownThrows) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [] {
    std::atomic<bool> started{false}, threw{false};
    std::atomic<int> accepted{0}, ran{0};
    {
      auto pool = std::make_unique<TypeParam>(1);
      pool->submit([&, p = pool.get()] {
        started = true;
        const auto give_up = std::chrono::steady_clock::now() + 10s;
        while (std::chrono::steady_clock::now() < give_up) {
          try {
            p->submit([&ran] { ran.fetch_add(1); });
            accepted.fetch_add(1);
          } catch (const std::runtime_error&) {
            threw = true;
            return;
          }
          std::this_thread::sleep_for(200us);
        }
      });
      while (!started) std::this_thread::yield();
      pool.reset();  // begins shutdown while the task above is still submitting
    }
    EXPECT_TRUE(threw.load()) << "submit() during shutdown did not throw std::runtime_error";
    EXPECT_EQ(ran.load(), accepted.load()) << "tasks accepted before shutdown were dropped";
  })));
}

}  // namespace
