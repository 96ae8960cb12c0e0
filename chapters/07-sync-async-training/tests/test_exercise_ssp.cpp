// Exercise 7.2, the SSP clock, through the checks its reference passes (the suite typed over
// SspClock and StudentSspClock, exercises/student_ssp.hpp; see test_exercises.cpp for the
// chapter's other two exercises):
//   ch07_tests --gtest_filter='BoundedWaitEx7_2/student.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../exercises/student_ssp.hpp"
#include "concurdl/asgd/parameter_server.hpp"
#include "exercise_util.hpp"

namespace {

using namespace concurdl::asgd;
using namespace ch07_exercises;
using namespace std::chrono_literals;

// --- 7.2 the SSP clock -----------------------------------------------------------------------

// On one thread, where nothing needs to block: clocks, leads, and a worker that leaves no
// longer counts as the slowest.
template <class Clock>
void clocks_leads_and_leaving() {
  Clock clock(3, 1);
  EXPECT_EQ(clock.bound(), 1u);
  EXPECT_EQ(clock.wait_turn(0), 0u);
  clock.advance(0);
  EXPECT_EQ(clock.wait_turn(0), 1u) << "1 step ahead with bound 1: may go, with lead 1";
  clock.advance(0);
  EXPECT_EQ(clock.clock(0), 2u);
  EXPECT_EQ(clock.clock(1), 0u);
  clock.advance(1);
  clock.advance(1);
  clock.leave(2);  // at 0: the slowest active worker is now at 2
  EXPECT_EQ(clock.wait_turn(0), 0u) << "worker 2 left: it holds nobody back";
  EXPECT_EQ(clock.wait_turn(1), 0u);
  clock.leave(1);
  for (int i = 0; i < 5; ++i) clock.advance(0);
  EXPECT_EQ(clock.wait_turn(0), 0u) << "the last worker left is never ahead of anyone";
  EXPECT_EQ(clock.clock(0), 7u);
  EXPECT_EQ(clock.max_lead(), 1u);
  EXPECT_EQ(clock.waits(), 0u);
  EXPECT_THROW(Clock no_workers(0, 1), std::invalid_argument);
}

// Bound 0, worker 0 one step ahead: wait_turn blocks until worker 1 advances (round 0) or
// leaves (round 1), and then returns.
template <class Clock>
void blocks_until_the_slowest_advances_or_leaves() {
  Clock clock(2, 0);
  EXPECT_EQ(clock.wait_turn(0), 0u);
  clock.advance(0);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "worker 1 advances" : "worker 1 leaves");
    std::atomic<bool> returned{false};
    std::uint64_t lead = 99;
    std::exception_ptr error;
    std::jthread waiter([&] {
      try {
        lead = clock.wait_turn(0);
      } catch (...) {
        error = std::current_exception();
      }
      returned = true;
    });
    // Until the waiter is seen blocked (waits() counts a wait_turn that had to wait), for at
    // most 10 s: a fixed sleep here let a waiter that started late on a loaded machine miss
    // the whole window and count no wait. Then 20 ms more, in which a wait_turn that did not
    // block would have returned.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (clock.waits() < static_cast<std::uint64_t>(round) + 1 && !returned.load() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(returned.load()) << "wait_turn returned with worker 0 ahead, bound 0";
    if (round == 0)
      clock.advance(1);
    else
      clock.leave(1);
    waiter.join();  // a lost wake-up hangs here, and finishes_within fails the test
    if (error) std::rethrow_exception(error);
    EXPECT_EQ(lead, 0u);
    clock.advance(0);
  }
  EXPECT_EQ(clock.waits(), 2u);
  EXPECT_EQ(clock.max_lead(), 0u);
}

// Bound 0, workers 0 and 1 a step ahead of worker 2, both waiting: worker 2's advance lets both
// go, and both must wake (a notify_one wakes one of them only).
template <class Clock>
void one_advance_releases_every_waiter() {
  Clock clock(3, 0);
  clock.advance(0);
  clock.advance(1);
  std::atomic<int> returned{0};
  std::exception_ptr error[2];
  {
    std::vector<std::jthread> waiters;
    for (int w = 0; w < 2; ++w)
      waiters.emplace_back([&, w] {
        try {
          clock.wait_turn(w);
        } catch (...) {
          error[w] = std::current_exception();
        }
        returned.fetch_add(1);
      });
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(returned.load(), 0) << "wait_turn returned with the worker ahead, bound 0";
    clock.advance(2);
    for (int i = 0; i < 500 && returned.load() < 2; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(returned.load(), 2) << "worker 2's advance let workers 0 and 1 go, but only "
                                  << returned.load() << " of them woke within 5 s (notify_one?)";
    // Wake the one left behind, if any, so that the threads can be joined.
    for (int i = 0; i < 100 && returned.load() < 2; ++i) {
      clock.advance(2);
      std::this_thread::sleep_for(10ms);
    }
  }
  for (const std::exception_ptr& e : error)
    if (e) std::rethrow_exception(e);
}

// Workers with unequal work and unequal step counts (worker w takes 50 + 40 w steps, the
// slower ones spin longer): every wait_turn returns a lead within the bound, no worker is seen
// starting a step more than the bound ahead of the slowest that has not left, every step is
// taken, and nobody is left waiting for a worker that left.
// The test's own view of the slowest comes from counts each worker bumps before advance() and
// flags it sets before leave(), read after wait_turn returned: it can only be further along than
// what the clock saw when it let the worker go, so a correct clock never fails it.
template <class Clock>
void no_worker_is_ever_more_than_the_bound_ahead(int workers) {
  for (std::uint64_t bound : {0u, 1u, 3u}) {
    SCOPED_TRACE(::testing::Message() << workers << " workers, bound " << bound);
    Clock clock(workers, bound);
    const auto count = static_cast<std::size_t>(workers);
    std::vector<std::atomic<std::uint64_t>> done(count);
    std::vector<std::atomic<bool>> gone(count);
    std::atomic<std::uint64_t> said_over{0}, seen_over{0}, steps{0};
    run_team(workers, [&](int w) {
      const auto me = static_cast<std::size_t>(w);
      try {
        const std::uint64_t mine = 50 + 40 * static_cast<std::uint64_t>(w);
        for (std::uint64_t i = 0; i < mine; ++i) {
          if (clock.wait_turn(w) > bound) said_over.fetch_add(1);
          std::uint64_t slowest = i;
          for (std::size_t u = 0; u < count; ++u)
            if (!gone[u].load()) slowest = std::min(slowest, done[u].load());
          if (i > slowest + bound) seen_over.fetch_add(1);
          spin(200 * (workers - w));
          steps.fetch_add(1);
          done[me].fetch_add(1);
          clock.advance(w);
        }
      } catch (...) {
        gone[me] = true;  // let the others finish, then report
        try {
          clock.leave(w);
        } catch (...) {
        }
        throw;
      }
      gone[me] = true;
      clock.leave(w);
    });
    EXPECT_EQ(said_over.load(), 0u) << "wait_turn returned a lead above the bound";
    EXPECT_EQ(seen_over.load(), 0u)
        << "a worker started a step more than the bound ahead of the slowest active one";
    EXPECT_LE(clock.max_lead(), bound);
    std::uint64_t expect = 0;
    for (int w = 0; w < workers; ++w) {
      const std::uint64_t mine = 50 + 40 * static_cast<std::uint64_t>(w);
      EXPECT_EQ(clock.clock(w), mine) << "worker " << w;
      expect += mine;
    }
    EXPECT_EQ(steps.load(), expect);
  }
}

template <class Clock>
class BoundedWaitEx7_2 : public ::testing::Test {};
using Clocks = ::testing::Types<SspClock, StudentSspClock>;
TYPED_TEST_SUITE(BoundedWaitEx7_2, Clocks, ImplNames);

TYPED_TEST(BoundedWaitEx7_2, ClocksLeadsAndLeaving) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, clocks_leads_and_leaving<TypeParam>)));
}

TYPED_TEST(BoundedWaitEx7_2, BlocksUntilTheSlowestAdvancesOrLeaves) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(
      finishes_within(kDeadline, blocks_until_the_slowest_advances_or_leaves<TypeParam>)));
}

TYPED_TEST(BoundedWaitEx7_2, OneAdvanceReleasesEveryWaiter) {
  CDL_TRY_EXERCISE(
      ASSERT_TRUE(finishes_within(kDeadline, one_advance_releases_every_waiter<TypeParam>)));
}

TYPED_TEST(BoundedWaitEx7_2, NoWorkerIsEverMoreThanTheBoundAhead) {
  for (int workers : kThreadCounts)
    CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [workers] {
      no_worker_is_ever_more_than_the_bound_ahead<TypeParam>(workers);
    })));
}

}  // namespace
