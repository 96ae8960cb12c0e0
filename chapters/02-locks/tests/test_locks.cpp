// The lock table's tests (lock_variants.hpp), over every row and the student locks of exercises
// 2.1 and 2.2: the single-threaded contract (try_lock on a held and a free lock, lock_guard),
// then mutual exclusion proved by a plain (non-atomic) counter incremented under the lock by 1,
// 2, 4 and 8 threads, with lock() and with try_lock(): the total must be exact. Ticket locks
// must be FIFO; the MCS lock must allow nesting and its scoped guard; Jain's index is checked
// by hand. Every concurrent test runs under a watchdog (within_seconds).
//   ch02_tests --gtest_filter='Locks*:LockEx*:TicketFifo*:Mcs*:Jain*:Backoff*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "../exercises/student_locks.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/locks/lock_variants.hpp"
#include "concurdl/locks/queue_variants.hpp"  // kThreadSanitizer
#include "concurdl/locks/spinlocks.hpp"

// gtest finds PrintTo by argument-dependent lookup: in the row type's namespace. It names the
// row in test listings (and so in CTest) instead of dumping its bytes.
namespace concurdl::locks {
void PrintTo(const LockVariant& v, std::ostream* os) { *os << v.name; }
}  // namespace concurdl::locks

namespace {

using namespace concurdl::locks;
using concurdl::testing::within_seconds;
using namespace std::chrono_literals;

constexpr unsigned kThreads[] = {1, 2, 4, 8};
// Increments per thread. A pure spinlock with more threads than cores can lose a time slice per
// hand-over (the next holder is not running), so oversubscribed spinlock runs get fewer.
constexpr std::uint64_t kIterations = kThreadSanitizer ? 2'000 : 20'000;
constexpr std::uint64_t kOversubscribedSpinIterations = kThreadSanitizer ? 200 : 1'000;
constexpr int kWatchdogSeconds = 90;

std::uint64_t iterations_for(const LockVariant& v, unsigned threads) {
  return v.pure_spin && threads > std::thread::hardware_concurrency()
             ? kOversubscribedSpinIterations
             : kIterations;
}

class LockSuite : public ::testing::TestWithParam<LockVariant> {};

TEST_P(LockSuite, ContractOnOneThread) {
  CDL_TRY_EXERCISE(EXPECT_STREQ(GetParam().contract_violation(), ""));
}

TEST_P(LockSuite, PlainCounterIsExactWithLock) {
  const LockVariant& v = GetParam();
  // On this thread first: an untouched stub throws here, not inside a worker.
  CDL_TRY_EXERCISE(ASSERT_STREQ(v.contract_violation(), ""));
  within_seconds(kWatchdogSeconds, [&v] {
    for (unsigned threads : kThreads) {
      const std::uint64_t n = iterations_for(v, threads);
      EXPECT_EQ(v.count(threads, n, false), threads * n) << threads << " threads";
    }
  });
}

TEST_P(LockSuite, PlainCounterIsExactWithTryLockAndLockMixed) {
  const LockVariant& v = GetParam();
  CDL_TRY_EXERCISE(ASSERT_STREQ(v.contract_violation(), ""));
  within_seconds(kWatchdogSeconds, [&v] {
    for (unsigned threads : kThreads) {
      const std::uint64_t n = iterations_for(v, threads);
      EXPECT_EQ(v.count(threads, n, true), threads * n) << threads << " threads";
    }
  });
}

// The experiments' driver: fixed duration, per-thread counts that add up to the protected one.
TEST_P(LockSuite, ContentionDriverAccountsForEveryAcquisition) {
  const LockVariant& v = GetParam();
  CDL_TRY_EXERCISE(ASSERT_STREQ(v.contract_violation(), ""));
  within_seconds(kWatchdogSeconds, [&v] {
    for (unsigned threads : {1u, 2u, 4u}) {
      const ContentionResult r = v.contend(threads, cs_steps_for(100), 20ms);
      ASSERT_EQ(r.per_thread.size(), threads);
      EXPECT_GT(r.total(), 0u);
      EXPECT_EQ(r.protected_count, r.total()) << threads << " threads";
      EXPECT_GE(r.seconds, 0.019);
      const double j = jain_index(r.per_thread);
      EXPECT_GE(j, 1.0 / threads - 1e-12);
      EXPECT_LE(j, 1.0 + 1e-12);
    }
  });
}

std::string lock_name(const ::testing::TestParamInfo<LockVariant>& info) {
  return std::string(info.param.name);
}

INSTANTIATE_TEST_SUITE_P(Locks, LockSuite, ::testing::ValuesIn(kLockVariants), lock_name);
INSTANTIATE_TEST_SUITE_P(
    LockEx2_1, LockSuite,
    ::testing::Values(lock_row<StudentTtasBackoffLock>("student", "exercise 2.1", true, false)),
    lock_name);
INSTANTIATE_TEST_SUITE_P(LockEx2_2, LockSuite,
                         ::testing::Values(lock_row<StudentTicketLock>("student", "exercise 2.2",
                                                                       true, true)),
                         lock_name);

TEST(LockTable, RowsAreNamedDescribedAndDistinct) {
  std::set<std::string_view> names;
  for (const LockVariant& v : kLockVariants) {
    EXPECT_TRUE(names.insert(v.name).second) << "duplicate " << v.name;
    EXPECT_FALSE(v.what.empty()) << v.name;
    EXPECT_EQ(kLockVariants.lookup(v.name), &v);
  }
  EXPECT_EQ(kLockVariants[0].name, "std_mutex") << "the baseline comes first";
  EXPECT_FALSE(kLockVariants[0].pure_spin);
  EXPECT_EQ(kLockVariants.lookup("no_such_lock"), nullptr);
}

// --- FIFO hand-over: ticket locks --------------------------------------------------------------

// The test thread holds the lock; threads 1, 2, 3 queue up one at a time (each started only when
// the previous one has taken its ticket: queued() counts holder + waiters); then the lock is
// released. A FIFO lock must grant it in queue order, every time: five rounds, so that an unfair
// lock cannot pass by luck (a waiter order of 1, 2, 3 five times in a row).
template <class L>
class TicketFifo : public ::testing::Test {};
struct TicketNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, TicketLock> ? "reference" : "student";
  }
};
using TicketLocks = ::testing::Types<TicketLock, StudentTicketLock>;
TYPED_TEST_SUITE(TicketFifo, TicketLocks, TicketNames);

TYPED_TEST(TicketFifo, GrantsTheLockInArrivalOrder) {
  TypeParam lock;
  CDL_TRY_EXERCISE({
    lock.lock();
    lock.unlock();
  });
  within_seconds(kWatchdogSeconds, [&lock] {
    constexpr int kWaiters = 3, kRounds = 5;
    for (int round = 0; round < kRounds; ++round) {
      SCOPED_TRACE(::testing::Message() << "round " << round);
      lock.lock();
      std::vector<int> order;  // written under the lock
      std::vector<std::jthread> waiters;
      for (int k = 1; k <= kWaiters; ++k) {
        waiters.emplace_back([&lock, &order, k] {
          lock.lock();
          order.push_back(k);
          lock.unlock();
        });
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (lock.queued() < static_cast<std::uint32_t>(k + 1) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        if (lock.queued() != static_cast<std::uint32_t>(k + 1)) {
          ADD_FAILURE() << "waiter " << k << " never took a ticket";
          break;
        }
      }
      lock.unlock();
      waiters.clear();  // join
      EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
      EXPECT_EQ(lock.queued(), 0u);
    }
  });
}

// --- MCS: nesting, any unlock order, the scoped guard -------------------------------------------

TEST(McsLock, NestedLocksReleasedInAnyOrder) {
  McsLock a, b, c;
  a.lock();
  b.lock();
  c.lock();
  b.unlock();  // not LIFO: the holder's node is found through the lock, not a stack
  EXPECT_TRUE(b.try_lock());
  a.unlock();
  c.unlock();
  b.unlock();
  std::scoped_lock all(a, b, c);  // std::lock's algorithm: lock, try_lock, unlock
}

TEST(McsLock, ScopedGuardExcludesAndCounts) {
  within_seconds(kWatchdogSeconds, [] {
    McsLock lock;
    std::uint64_t counter = 0;
    {
      // Two threads: more would oversubscribe a small machine, where every MCS hand-over to a
      // descheduled waiter costs a time slice (the oversubscribed runs are in LockSuite).
      std::vector<std::jthread> team;
      for (int t = 0; t < 2; ++t)
        team.emplace_back([&] {
          for (std::uint64_t i = 0; i < kIterations; ++i) {
            McsLock::Guard g(lock);
            ++counter;
          }
        });
    }
    EXPECT_EQ(counter, 2 * kIterations);
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
  });
}

TEST(McsLock, TooManyHeldAtOnceIsAnError) {
  std::vector<McsLock> locks(McsLock::kMaxHeld + 1);
  for (int i = 0; i < McsLock::kMaxHeld; ++i) locks[static_cast<std::size_t>(i)].lock();
  EXPECT_THROW(locks.back().lock(), std::logic_error);
  for (int i = 0; i < McsLock::kMaxHeld; ++i) locks[static_cast<std::size_t>(i)].unlock();
  locks.back().lock();  // nodes are free again
  locks.back().unlock();
}

// --- Jain's index and the backoff ---------------------------------------------------------------

TEST(Jain, HandComputedValues) {
  const std::vector<std::uint64_t> equal = {5, 5, 5, 5}, one = {8, 0, 0, 0}, two_one = {2, 1};
  EXPECT_DOUBLE_EQ(jain_index(equal), 1.0);
  EXPECT_DOUBLE_EQ(jain_index(one), 0.25);            // 1/n
  EXPECT_DOUBLE_EQ(jain_index(two_one), 9.0 / 10.0);  // (2+1)^2 / (2 (4+1))
  EXPECT_DOUBLE_EQ(jain_index(std::vector<std::uint64_t>{}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index(std::vector<std::uint64_t>{0, 0}), 1.0);
}

TEST(Backoff, LimitDoublesUpToItsCap) {
  Backoff b(4, 32);
  EXPECT_EQ(b.limit(), 4u);
  b.pause();
  EXPECT_EQ(b.limit(), 8u);
  for (int i = 0; i < 10; ++i) b.pause();
  EXPECT_EQ(b.limit(), 32u);
}

TEST(CriticalSection, StepsScaleWithTheRequestedLength) {
  EXPECT_EQ(cs_steps_for(0), 0u);
  EXPECT_GE(cs_steps_for(1), 1u);
  EXPECT_GT(cs_steps_for(1000), cs_steps_for(100));
  EXPECT_GT(ns_per_cs_step(), 0.0);
}

}  // namespace
