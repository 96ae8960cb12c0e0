// Threads vs processes (processes.hpp, ping_pong.hpp): every reduction variant equals the serial
// sum at 1, 2, 4 and 8 workers; a failing worker becomes an exception that names it and its exit
// status or signal; no child is ever left unreaped; every spawn and every ping-pong hop happens.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "concurdl/core/testing.hpp"
#include "concurdl/threads/ping_pong.hpp"
#include "concurdl/threads/processes.hpp"
#include "concurdl/threads/spawn_cost.hpp"

namespace {

using namespace concurdl::threads;

using concurdl::testing::within_seconds;

// No zombie and no running child: waitpid(-1) finds no child of this process at all.
void expect_no_children(const std::string& where) {
  int status = 0;
  errno = 0;
  const pid_t r = ::waitpid(-1, &status, WNOHANG);
  const int err = errno;
  EXPECT_EQ(r, -1) << where << ": "
                   << (r == 0 ? "a child is still running" : "a zombie child was left");
  EXPECT_EQ(err, ECHILD) << where;
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

// --- the reduction -----------------------------------------------------------------------------

class ProcReduceVariants : public ::testing::TestWithParam<ProcessReduceVariant> {};

TEST_P(ProcReduceVariants, MatchesTheSerialSum) {
  within_seconds(60, [] {
    const ProcessReduceVariant& v = GetParam();
    // 100003 does not divide by 2, 4 or 8; 5 leaves some of 8 workers without elements; 0 all.
    for (std::size_t n : {std::size_t(100003), std::size_t(5), std::size_t(0)}) {
      const std::vector<std::int32_t> x = make_int_input(n);
      const std::int64_t want = sum_serial(x);
      for (int workers : {1, 2, 4, 8})
        EXPECT_EQ(v.reduce(x, workers, FailureInjection{}), want)
            << "n=" << n << " workers=" << workers;
    }
    expect_no_children(std::string(v.name));
  });
}

TEST_P(ProcReduceVariants, ReportsAFailingWorker) {
  within_seconds(60, [] {
    const ProcessReduceVariant& v = GetParam();
    const std::vector<std::int32_t> x = make_int_input(1000);
    for (int workers : {2, 4, 8}) {
      const FailureInjection fail{.worker = 1, .exit_status = 3, .signal = 0};
      std::exception_ptr error;
      try {
        v.reduce(x, workers, fail);
      } catch (const std::runtime_error&) {
        error = std::current_exception();
      }
      ASSERT_TRUE(error) << "workers=" << workers << ": the failure was not reported";
      const std::string what = message_of(error);
      EXPECT_NE(what.find("worker 1"), std::string::npos) << what;
      if (v.workers == Workers::processes) {
        EXPECT_NE(what.find("exited with status 3"), std::string::npos) << what;
      }
      expect_no_children(what);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Proc, ProcReduceVariants, ::testing::ValuesIn(kProcessReduceVariants),
                         [](const auto& info) { return std::string(info.param.name); });

// Only processes: a signal such as SIGKILL cannot end one thread, it ends the whole process.
TEST(ProcReduce, ReportsAKilledWorker) {
  within_seconds(60, [] {
    const std::vector<std::int32_t> x = make_int_input(1000);
    for (const ProcessReduceVariant& v : kProcessReduceVariants) {
      if (v.workers != Workers::processes) continue;
      const FailureInjection fail{.worker = 2, .exit_status = 0, .signal = SIGKILL};
      std::exception_ptr error;
      try {
        v.reduce(x, 4, fail);
      } catch (const std::runtime_error&) {
        error = std::current_exception();
      }
      ASSERT_TRUE(error) << v.name << ": the killed worker was not reported";
      const std::string what = message_of(error);
      EXPECT_NE(what.find("worker 2"), std::string::npos) << what;
      EXPECT_NE(what.find("killed by signal 9"), std::string::npos) << what;
      expect_no_children(what);
    }
  });
}

TEST(ProcReduce, RejectsZeroWorkers) {
  const std::vector<std::int32_t> x = make_int_input(10);
  for (const ProcessReduceVariant& v : kProcessReduceVariants)
    EXPECT_THROW(v.reduce(x, 0, FailureInjection{}), std::invalid_argument) << v.name;
}

// --- creation cost -----------------------------------------------------------------------------

TEST(ProcSpawn, EveryWorkerRunsAndIsReaped) {
  within_seconds(60, [] {
    for (const SpawnVariant& v : kSpawnVariants) {
      const SpawnResult r = v.spawn(5);
      EXPECT_EQ(r.completed, 5) << v.name;
      EXPECT_GE(r.seconds, 0.0) << v.name;
      expect_no_children(std::string(v.name));
    }
  });
}

// --- ping-pong ---------------------------------------------------------------------------------

class ProcPingPongVariants : public ::testing::TestWithParam<PingPongVariant> {};

TEST_P(ProcPingPongVariants, EveryHopIsCounted) {
  within_seconds(60, [] {
    for (std::int64_t round_trips : {1, 2, 300}) {
      const PingPongResult r = GetParam().run(round_trips);
      EXPECT_EQ(r.counter, expected_hops(round_trips)) << "round_trips=" << round_trips;
      // Each side checks, on every wake-up, that the counter is at its turn's value: a side
      // that went on without waiting for the other would count hops right and fail here.
      EXPECT_EQ(r.out_of_turn, 0) << "round_trips=" << round_trips;
      EXPECT_GT(r.seconds, 0.0) << "the timed round trips were not timed";
    }
    expect_no_children(std::string(GetParam().name));
  });
}

INSTANTIATE_TEST_SUITE_P(Proc, ProcPingPongVariants, ::testing::ValuesIn(kPingPongVariants),
                         [](const auto& info) { return std::string(info.param.name); });

// The partner process exits with status 3 before the parent is done: before reading anything
// (the parent's write may then fail with EPIPE, which must not kill it with SIGPIPE) or after a
// few hops (the parent reads end-of-file). Either way: an exception naming the status, no zombie.
TEST(ProcPingPong, ADeadPartnerProcessIsReported) {
  within_seconds(60, [] {
    for (std::int64_t exits_after : {0, 5}) {
      std::exception_ptr error;
      try {
        ping_pong_processes(100, exits_after);
      } catch (const std::runtime_error&) {
        error = std::current_exception();
      }
      ASSERT_TRUE(error) << "exits_after=" << exits_after << ": not reported";
      const std::string what = message_of(error);
      EXPECT_NE(what.find("exited with status 3"), std::string::npos) << what;
      expect_no_children(what);
    }
  });
}

}  // namespace
