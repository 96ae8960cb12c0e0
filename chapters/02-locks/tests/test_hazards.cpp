// Deadlock and livelock (hazards.hpp), detected and fixed: the naive transfers deadlock and the
// watchdog reports the cycle by name within its timeout (and the run ends); std::scoped_lock and
// the student's transfer (exercise 2.4) finish at 2 to 8 threads over 2 and 3 accounts with the
// money conserved; the polite workers livelock and the run stops at its cap and says so;
// randomised backoff makes progress.
//   ch02_tests --gtest_filter='Hazards*:TransferEx2_4*:Transfers*'
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "../exercises/student_transfer.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/locks/hazards.hpp"
#include "concurdl/locks/queue_variants.hpp"  // kThreadSanitizer

namespace {

using namespace concurdl::locks;
using concurdl::testing::within_seconds;
using namespace std::chrono_literals;

constexpr int kWatchdogSeconds = 90;

// The watchdog starts before the workers: on a loaded machine (or under a sanitizer) a worker
// that starts over `timeout` late makes a stall with no cycle, or finds the other done. So up
// to three runs, every one conserving the money, and one of them must deadlock on the cycle.
TEST(Hazards, DeadlockIsDetectedWithinTheWatchdogTimeout) {
  within_seconds(kWatchdogSeconds, [] {
    TransferOptions o;
    o.threads = 2;
    o.transfers_per_thread = 200;
    o.timeout = 200ms;
    o.window = 100us;
    TransferOutcome r;
    std::string others;  // the runs that did not deadlock, for the failure message
    for (int run = 0; run < 3; ++run) {
      r = run_transfers(&transfer_naive, o);
      EXPECT_EQ(r.total_after, r.total_before) << "an aborted transfer must not lose money";
      if (r.deadlock_detected && r.cycle_found) break;
      others += "\n  run " + std::to_string(run) + ": " +
                (r.finished ? std::string("finished") : r.report);
    }
    ASSERT_TRUE(r.deadlock_detected && r.cycle_found) << "no deadlock in 3 runs:" << others;
    EXPECT_FALSE(r.finished);
    // The report names both threads and both locks.
    for (const char* name : {"worker 0", "worker 1", "account 0", "account 1"})
      EXPECT_NE(r.report.find(name), std::string::npos) << name << " missing from: " << r.report;
    EXPECT_NE(r.report.find("deadlock"), std::string::npos) << r.report;
    // Detected after `timeout` without progress, and not much later (the watchdog polls every
    // 2 ms; a generous margin for slow sanitizer builds).
    EXPECT_GE(r.stalled_for, 0.2);
    EXPECT_LT(r.stalled_for, 0.2 + 2.0);
  });
}

TEST(Hazards, WithoutTheWidenedWindowTheNaiveTransfersStillDeadlockOrFinish) {
  // With no window the deadlock is a race that may or may not happen: either outcome must end
  // (finished, or caught by the watchdog) with the money conserved. Never a hang.
  within_seconds(kWatchdogSeconds, [] {
    TransferOptions o;
    o.threads = 4;
    o.transfers_per_thread = kThreadSanitizer ? 200 : 2000;
    o.timeout = 200ms;
    o.window = 0us;
    const TransferOutcome r = run_transfers(&transfer_naive, o);
    EXPECT_TRUE(r.finished || (r.deadlock_detected && r.cycle_found)) << r.report;
    EXPECT_EQ(r.total_after, r.total_before);
  });
}

TEST(Hazards, LivelockStopsAtItsCapAndReportsNoProgress) {
  within_seconds(kWatchdogSeconds, [] {
    const LivelockOutcome r = run_polite_workers(RetryPolicy::immediate, 50, 500);
    EXPECT_TRUE(r.gave_up);
    EXPECT_EQ(r.rounds, 500u);
    EXPECT_EQ(r.successes, 0u);
    EXPECT_EQ(r.attempts, 2u * 500u) << "both threads tried every round: busy, yet stuck";
    EXPECT_NE(r.report.find("livelock"), std::string::npos) << r.report;
  });
}

TEST(Hazards, RandomisedBackoffMakesProgress) {
  within_seconds(kWatchdogSeconds, [] {
    const LivelockOutcome r = run_polite_workers(RetryPolicy::randomised, 100, 100'000);
    EXPECT_FALSE(r.gave_up) << r.report;
    EXPECT_GE(r.successes, 100u);
    EXPECT_LT(r.rounds, 100'000u);
  });
}

// --- deadlock-free transfers: the reference and exercise 2.4 -----------------------------------

struct TransferImpl {
  const char* name;
  TransferFn fn;
};
void PrintTo(const TransferImpl& t, std::ostream* os) { *os << t.name; }

class Transfers : public ::testing::TestWithParam<TransferImpl> {};

TEST_P(Transfers, NeverDeadlockAndConserveMoney) {
  const TransferFn fn = GetParam().fn;
  {
    // The first call on this thread: an untouched stub throws here.
    LockMonitor monitor;
    Account a("a", 10, monitor), b("b", 10, monitor);
    CDL_TRY_EXERCISE(fn(a, b, 3));
    EXPECT_EQ(a.balance, 7);
    EXPECT_EQ(b.balance, 13);
    fn(b, a, 5);
    EXPECT_EQ(a.balance, 12);
    EXPECT_EQ(b.balance, 8);
  }
  within_seconds(kWatchdogSeconds, [fn] {
    for (unsigned threads : {2u, 4u, 8u})
      for (unsigned accounts : {2u, 3u}) {
        SCOPED_TRACE(::testing::Message() << threads << " threads, " << accounts << " accounts");
        TransferOptions o;
        o.threads = threads;
        o.accounts = accounts;
        o.transfers_per_thread = kThreadSanitizer ? 50 : 200;
        o.timeout = 2s;   // generous: with the window each transfer holds a lock ~50 us
        o.window = 50us;  // widen the race window, so a lock-order bug shows at once
        const TransferOutcome r = run_transfers(fn, o);
        EXPECT_FALSE(r.deadlock_detected) << r.report;
        EXPECT_TRUE(r.finished) << r.transfers_done << " transfers made";
        EXPECT_EQ(r.total_after, r.total_before);
      }
  });
}

std::string transfer_name(const ::testing::TestParamInfo<TransferImpl>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Reference, Transfers,
                         ::testing::Values(TransferImpl{"scoped_lock", &transfer_ordered}),
                         transfer_name);
INSTANTIATE_TEST_SUITE_P(TransferEx2_4, Transfers,
                         ::testing::Values(TransferImpl{"student", &student_transfer}),
                         transfer_name);

TEST(LockMonitor, DescribesHoldersAndWaiters) {
  LockMonitor monitor;
  monitor.name_this_thread("main");
  TrackedMutex m("the lock", monitor);
  m.lock();
  EXPECT_NE(monitor.describe().find("'main' holds 'the lock'"), std::string::npos)
      << monitor.describe();
  EXPECT_EQ(monitor.find_cycle(), "");
  m.unlock();
  EXPECT_NE(monitor.describe().find("holds nothing"), std::string::npos) << monitor.describe();
}

}  // namespace
